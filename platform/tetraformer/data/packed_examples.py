"""Examples of (input ids, labels) batched padded, or several packed per row with positions and documents of their own.

Each example is already shifted (labels[t] is the target after input_ids[t]), so a packed row never asks one
example to predict the next one's first token.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import Any

import torch

from tetraformer.data.collate import IGNORE_INDEX

Example = dict[str, list[int]]  # input_ids and labels of the same length


def best_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Indices of examples grouped into bins of at most `capacity` tokens: longest first, each into the fullest bin
    it fits (a new bin when none does). Every length must be at most `capacity`."""
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room left, bin index), sorted
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        size = lengths[index]
        if size > capacity:
            raise ValueError(f"an example of {size} tokens does not fit a row of {capacity}")
        at = bisect_left(free, (size, -1))
        if at == len(free):
            bins.append([index])
            room, number = capacity - size, len(bins) - 1
        else:
            room, number = free.pop(at)
            bins[number].append(index)
            room -= size
        insort(free, (room, number))
    return bins


class PaddedExamples:
    """Collator: examples right-padded to the longest of the batch (pad id, labels IGNORE_INDEX).

    A causal model needs no mask for right padding: real tokens never attend later positions. The batch's
    `attention_mask` says which positions are real tokens (the pad id may be one, e.g. EOS), for counting them.
    """

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, rows: list[Example]) -> dict[str, torch.Tensor]:
        """(B, T) input_ids, labels and attention_mask."""
        width = max(len(row["input_ids"]) for row in rows)
        lengths = torch.tensor([len(row["input_ids"]) for row in rows])  # (B,)
        return {
            "input_ids": _padded([row["input_ids"] for row in rows], width, self.pad_id),
            "labels": _padded([row["labels"] for row in rows], width, IGNORE_INDEX),
            "attention_mask": torch.arange(width) < lengths[:, None],  # (B, T)
        }


class PackedExamples:
    """Collator: each row is a bin of examples laid end to end, padded to the batch's longest row.

    position_ids restart at 0 in each example; document_ids number the examples of a row (padding gets -1), so
    attention stays inside an example (core: `document_ids`).
    """

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, bins: list[list[Example]]) -> dict[str, torch.Tensor]:
        """(B, T) input_ids, labels, position_ids and document_ids."""
        rows = [_pack(examples) for examples in bins]
        width = max(len(row["input_ids"]) for row in rows)
        return {
            "input_ids": _padded([r["input_ids"] for r in rows], width, self.pad_id),
            "labels": _padded([r["labels"] for r in rows], width, IGNORE_INDEX),
            "position_ids": _padded([r["position_ids"] for r in rows], width, 0),
            "document_ids": _padded([r["document_ids"] for r in rows], width, -1),
        }


class PackedBins(torch.utils.data.Dataset):
    """A dataset of bins: item i is the list of examples of bin i (best_fit_decreasing over their lengths, given
    when the examples can tell them without being read: a row store's)."""

    def __init__(self, examples: Sequence[Example], capacity: int, lengths: Sequence[int] | None = None) -> None:
        self.examples = examples
        lengths = [len(e["input_ids"]) for e in examples] if lengths is None else lengths
        self.bins = best_fit_decreasing(lengths, capacity)

    def __len__(self) -> int:
        return len(self.bins)

    def __getitem__(self, index: int) -> list[Example]:
        return [self.examples[i] for i in self.bins[index]]


def _pack(examples: list[Example]) -> dict[str, list[int]]:
    """One row: the examples' ids and labels end to end, each with positions from 0 and its own document id."""
    row: dict[str, list[Any]] = {"input_ids": [], "labels": [], "position_ids": [], "document_ids": []}
    for number, example in enumerate(examples):
        n = len(example["input_ids"])
        row["input_ids"] += example["input_ids"]
        row["labels"] += example["labels"]
        row["position_ids"] += range(n)
        row["document_ids"] += [number] * n
    return row


def _padded(rows: list[list[int]], width: int, value: int) -> torch.Tensor:
    """(B, width) LongTensor of the rows, filled with `value` after each row."""
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out
