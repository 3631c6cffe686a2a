"""Sequence-to-sequence batches: padded sources, -100-padded labels, and decoder inputs shifted right."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor

from tetraformer.data.collate import IGNORE_INDEX, PaddingCollator


def shift_right(labels: Tensor, start_id: int, pad_id: int) -> Tensor:
    """(B, T) labels -> (B, T) teacher-forcing decoder inputs: the start token, then labels[:, :-1].

    Ignored label positions (-100) become `pad_id`, so the decoder never sees a negative id.
    """
    shifted = labels.new_full(labels.shape, start_id)  # (B, T)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted == IGNORE_INDEX, pad_id)


class Seq2SeqCollator:
    """Pads rows of `input_ids` (source ids) and `labels` (target ids, ending with EOS) into a seq2seq batch.

    The batch holds `input_ids` / `attention_mask` (B, S), `labels` (B, T) padded with -100 so padding is
    ignored by the loss, `decoder_input_ids` (B, T) = labels shifted right after `decoder_start_id`, and
    `decoder_attention_mask` (B, T). Other row fields (e.g. the source and target strings) pass through
    as PaddingCollator handles them.
    """

    def __init__(self, pad_id: int, decoder_start_id: int) -> None:
        self.pad_id, self.decoder_start_id = pad_id, decoder_start_id
        self.pad = PaddingCollator(pad_id)

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """One batch of source/target rows, ready for teacher-forced training."""
        if any(len(row["labels"]) == 0 for row in rows):
            raise ValueError("a seq2seq row has no target tokens; targets end with EOS at least")
        batch = self.pad(rows)
        labels = batch["labels"]  # (B, T)
        batch["decoder_input_ids"] = shift_right(labels, self.decoder_start_id, self.pad_id)
        batch["decoder_attention_mask"] = labels != IGNORE_INDEX  # (B, T): a target token's own position
        return batch
