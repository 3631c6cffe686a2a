"""PaddingCollator: rows of 1-D sequences padded to the batch's longest row, with boolean attention masks."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
from torch.nn.utils.rnn import pad_sequence

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
            sequences = _as_sequences(values) if key in self.pad_values else None
            if sequences is not None:
                batch[key] = self.pad(sequences, self.pad_values[key])
                if key in MASKS and MASKS[key] not in rows[0]:
                    batch[MASKS[key]] = self.mask([len(s) for s in sequences], batch[key].shape[1])
            else:
                batch[key] = _stack(values)
        return batch

    def pad(self, sequences: list[torch.Tensor], value: int | bool) -> torch.Tensor:
        """(B, T_max) tensor of 1-D sequences, padded on the collator's side with `value`."""
        return pad_sequence(sequences, batch_first=True, padding_value=value, padding_side=self.side)  # (B, T)

    def mask(self, lengths: list[int], longest: int) -> torch.Tensor:
        """(B, T_max) boolean mask of the real positions of rows of these lengths, padded on the collator's side."""
        positions = torch.arange(longest)  # (T,)
        lengths_ = torch.tensor(lengths)[:, None]  # (B, 1)
        return positions < lengths_ if self.side == "right" else positions >= longest - lengths_


def _as_sequences(values: list[Any]) -> list[torch.Tensor] | None:
    """The values as 1-D tensors when every one is a 1-D tensor or a flat list/tuple of numbers, else None.

    Lists go through torch.as_tensor (one C loop each), which refuses strings and makes nested lists 2-D.
    """
    out = []
    for value in values:
        if isinstance(value, list | tuple):
            try:
                value = torch.as_tensor(value)
            except (TypeError, ValueError, RuntimeError):
                return None
        if not isinstance(value, torch.Tensor) or value.dim() != 1:
            return None
        out.append(value)
    dtype = next((t.dtype for t in out if len(t)), out[0].dtype)  # an empty list reads as float
    return [t.to(dtype) for t in out]


def _stack(values: list[Any]) -> Any:
    """Numbers -> (B,) tensor; equal-shape tensors -> (B, ...) tensor; anything else stays a list."""
    if all(isinstance(v, numbers.Number) for v in values):
        return torch.tensor(values)
    if all(isinstance(v, torch.Tensor) for v in values) and len({v.shape for v in values}) == 1:
        return torch.stack(values)
    return values
