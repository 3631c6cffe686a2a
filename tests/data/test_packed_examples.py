"""Best-fit-decreasing bins and the padded / packed collators of shifted (input_ids, labels) examples."""

from __future__ import annotations

import random

import pytest
import torch

from tetraformer.data import IGNORE_INDEX
from tetraformer.data.packed_examples import PackedBins, PackedExamples, PaddedExamples, best_fit_decreasing


def test_best_fit_decreasing_fills_bins() -> None:
    """Each example lands in exactly one bin, no bin overflows, and a known case needs the fewest bins."""
    lengths = [random.randint(1, 16) for _ in range(200)]
    bins = best_fit_decreasing(lengths, 16)
    assert sorted(i for b in bins for i in b) == list(range(200))
    assert all(sum(lengths[i] for i in b) <= 16 for b in bins)
    assert sum(sum(lengths[i] for i in b) <= 8 for b in bins) <= 1  # at most one bin is half full or less
    assert best_fit_decreasing([6, 5, 4, 3, 2], 10) == [[0, 2], [1, 3, 4]]  # 4 goes to 6's bin: the fuller fit


def test_an_example_longer_than_a_row_is_an_error() -> None:
    """Bins never silently cut examples."""
    with pytest.raises(ValueError, match="does not fit"):
        best_fit_decreasing([3, 9], 8)


def example(n: int, start: int) -> dict[str, list[int]]:
    """input_ids start..start+n, labels the same but the first ignored."""
    ids = list(range(start, start + n))
    return {"input_ids": ids, "labels": [IGNORE_INDEX, *ids[1:]]}


def test_padded_batches_pad_ids_and_ignore_padding() -> None:
    """Right padding: pad id in the inputs, IGNORE_INDEX in the labels; the mask marks the real tokens (a row's
    own pad-id token, 0 here, is real)."""
    batch = PaddedExamples(0)([example(3, 10), example(1, 20), example(2, 0)])
    assert batch["input_ids"].tolist() == [[10, 11, 12], [20, 0, 0], [0, 1, 0]]
    assert batch["attention_mask"].tolist() == [[True] * 3, [True, False, False], [True, True, False]]
    assert batch["labels"].tolist()[:2] == [[IGNORE_INDEX, 11, 12], [IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]]


def test_packed_rows_restart_positions_and_number_documents() -> None:
    """Examples of a bin end to end; positions from 0 and a document id each; padding is document -1."""
    bins = PackedBins([example(3, 10), example(2, 20), example(4, 30)], capacity=5)
    batch = PackedExamples(0)([bins[i] for i in range(len(bins))])
    assert len(bins) == 2
    assert batch["input_ids"].tolist() == [[30, 31, 32, 33, 0], [10, 11, 12, 20, 21]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 0], [0, 1, 2, 0, 1]]
    assert batch["document_ids"].tolist() == [[0, 0, 0, 0, -1], [0, 0, 0, 1, 1]]
    assert batch["labels"][1].tolist() == [IGNORE_INDEX, 11, 12, IGNORE_INDEX, 21]
    assert batch["labels"].dtype == torch.long
