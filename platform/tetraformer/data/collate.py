"""PaddingCollator: rows of 1-D sequences padded to the batch's longest row, with boolean attention masks."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch

MASKS = {"input_ids": "attention_mask", "decoder_input_ids": "decoder_attention_mask"}  # ids -> its mask
IGNORE_INDEX = -100  # label value the losses and metrics skip


class PaddingCollator:
    """Pads known sequence fields (ids with the pad id, token_type_ids with 0, labels with -100), adds masks.

    Scalars and equal-shape tensors are stacked; other fields (strings, lists, ragged tensors) stay lists.
    A `labels` field of scalars (one class per row) is stacked, not padded.
    """

    def __init__(
        self,
        pad_id: int,
        side: Literal["right", "left"] = "right",
        pad_values: Mapping[str, int] | None = None,
    ) -> None:
        if side not in ("right", "left"):
            raise ValueError(f"unknown padding side {side!r}; expected right or left")
        self.side = side
        self.pad_values = {
            "input_ids": pad_id,
            "decoder_input_ids": pad_id,
            "token_type_ids": 0,
            "labels": IGNORE_INDEX,
            **(pad_values or {}),
        }

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """One batch: {field: (B, T) padded tensor | (B, ...) stacked tensor | list}."""
        batch: dict[str, Any] = {}
        for key in rows[0]:
            values = [row[key] for row in rows]
            if key in self.pad_values and all(_is_sequence(v) for v in values):
                batch[key] = self.pad([torch.as_tensor(v) for v in values], self.pad_values[key])
                if key in MASKS and MASKS[key] not in rows[0]:
                    batch[MASKS[key]] = self.pad(
                        [torch.ones(len(v), dtype=torch.bool) for v in values], False
                    )
            else:
                batch[key] = _stack(values)
        return batch

    def pad(self, sequences: list[torch.Tensor], value: int | bool) -> torch.Tensor:
        """(B, T_max) tensor of 1-D sequences, padded on the collator's side with `value`."""
        longest = max(len(s) for s in sequences)
        out = torch.full((len(sequences), longest), value, dtype=sequences[0].dtype)  # (B, T)
        for i, seq in enumerate(sequences):
            if self.side == "right":
                out[i, : len(seq)] = seq
            else:
                out[i, longest - len(seq) :] = seq
        return out


def _is_sequence(value: Any) -> bool:
    """A 1-D tensor or a flat list/tuple of numbers."""
    if isinstance(value, torch.Tensor):
        return value.dim() == 1
    return isinstance(value, list | tuple) and all(isinstance(v, numbers.Number) for v in value)


def _stack(values: list[Any]) -> Any:
    """Numbers -> (B,) tensor; equal-shape tensors -> (B, ...) tensor; anything else stays a list."""
    if all(isinstance(v, numbers.Number) for v in values):
        return torch.tensor(values)
    if all(isinstance(v, torch.Tensor) for v in values) and len({v.shape for v in values}) == 1:
        return torch.stack(values)
    return values
