"""shift_right and Seq2SeqCollator: teacher-forcing decoder inputs and labels whose padding the loss ignores."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.seq2seq_batch import Seq2SeqCollator, shift_right

PAD, START, EOS = 0, 2, 3
ROWS = [
    {"input_ids": [5, 6, 7, EOS], "labels": [8, 9, EOS], "source": "a b c", "target": "x y"},
    {"input_ids": [5, EOS], "labels": [9, 10, 11, 12, EOS], "source": "a", "target": "y z w v"},
]


def test_shift_right_starts_with_the_start_token_and_pads_ignored_positions() -> None:
    labels = torch.tensor([[8, 9, EOS, IGNORE_INDEX], [9, 10, 11, EOS]])
    assert shift_right(labels, START, PAD).tolist() == [[START, 8, 9, EOS], [START, 9, 10, 11]]
    assert shift_right(labels, 0, 1)[0].tolist() == [0, 8, 9, EOS]  # T5: start with pad id 0


def test_collator_pads_sources_and_targets_and_shifts_labels() -> None:
    """Sources padded with pad and masked; labels padded with -100; decoder inputs shifted from the labels."""
    batch = Seq2SeqCollator(PAD, START)(ROWS)
    assert batch["input_ids"].tolist() == [[5, 6, 7, EOS], [5, EOS, PAD, PAD]]
    assert batch["attention_mask"].tolist() == [[True] * 4, [True, True, False, False]]
    assert batch["labels"].tolist() == [[8, 9, EOS, -100, -100], [9, 10, 11, 12, EOS]]
    assert batch["decoder_input_ids"].tolist() == [[START, 8, 9, EOS, PAD], [START, 9, 10, 11, 12]]
    assert batch["decoder_attention_mask"].tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    assert batch["source"] == ["a b c", "a"] and batch["target"] == ["x y", "y z w v"]


def test_padding_is_ignored_by_the_loss() -> None:
    """Cross-entropy with ignore_index over the padded batch equals the mean over the real target tokens only."""
    batch = Seq2SeqCollator(PAD, START)(ROWS)
    logits = torch.randn(*batch["labels"].shape, 16)  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)
    real = [
        F.cross_entropy(logits[b, : len(row["labels"])], torch.tensor(row["labels"]), reduction="sum")
        for b, row in enumerate(ROWS)
    ]
    assert loss.item() == pytest.approx((sum(real) / sum(len(r["labels"]) for r in ROWS)).item(), rel=1e-6)
    garbage = logits.clone()
    garbage[0, 3:] = 1e4  # the first row's padded positions
    relossed = F.cross_entropy(garbage.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)
    assert relossed.item() == pytest.approx(loss.item(), rel=1e-6)


def test_empty_target_is_an_error() -> None:
    with pytest.raises(ValueError, match="a seq2seq row has no target tokens"):
        Seq2SeqCollator(PAD, START)([{"input_ids": [5, EOS], "labels": []}])
