"""T5's span-corruption objective: noise spans of a token sequence become sentinels in the input, and the
target lists each sentinel with the tokens it replaced.

Spans are chosen as T5's `random_spans_noise_mask` does: round(length x noise_density) noise tokens (at least
one, never all), round(noise / mean_span_length) spans (at least one), both counts cut into that many
non-empty runs uniformly at random, and the runs interleaved starting with a kept run, so a sequence ends
with noise. For "a b c d e f g" with noise spans "c d" and "g":

    input   a b <extra_id_0> e f <extra_id_1> </s>
    target  <extra_id_0> c d <extra_id_1> g </s>

Like masking.py, corruption is drawn anew each time a batch is built (a new one each epoch) from the global
torch RNG, which Lightning's seed_everything and its DataLoader workers seed; rows that carry an int
`noise_seed` (validation, test) get the same corruption every time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from tetraformer.data.seq2seq_batch import Seq2SeqCollator
from tetraformer.data.tokenizer import sentinel_ids

_NONE = -1  # marks an empty slot while interleaving sentinels and tokens (token ids are >= 0)


class SpanCorruptor:
    """Corrupts one token id sequence T5's way; draws from an optional torch.Generator."""

    def __init__(
        self,
        sentinel_ids: Sequence[int],
        eos_id: int,
        noise_density: float = 0.15,
        mean_span_length: float = 3.0,
    ) -> None:
        if not 0.0 < noise_density < 1.0:
            raise ValueError(f"noise_density must be between 0 and 1 (exclusive), got {noise_density}")
        if mean_span_length < 1.0:
            raise ValueError(f"mean_span_length must be >= 1, got {mean_span_length}")
        if not sentinel_ids:
            raise ValueError("span corruption needs sentinel ids (<extra_id_0>, ...); none were given")
        self.sentinels = torch.tensor(list(sentinel_ids), dtype=torch.long)
        self.eos_id, self.noise_density, self.mean_span_length = eos_id, noise_density, mean_span_length

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, **options: Any) -> SpanCorruptor:
        """A corruptor with every sentinel the tokenizer has (see `sentinel_ids`) and its EOS token."""
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no eos token; span corruption ends input and target with one")
        return cls(sentinel_ids(tokenizer), tokenizer.eos_token_id, **options)

    def counts(self, length: int) -> tuple[int, int]:
        """(noise tokens, noise spans) for `length` tokens; a sequence under 2 tokens is kept whole."""
        if length < 2:
            return 0, 0
        noise = min(max(round(length * self.noise_density), 1), length - 1)
        spans = max(round(noise / self.mean_span_length), 1)
        return noise, min(spans, length - noise)  # each noise span follows a kept run

    def noise_mask(self, length: int, generator: torch.Generator | None = None) -> Tensor:
        """(length,) bool: True on the tokens the noise spans cover."""
        noise, spans = self.counts(length)
        if spans > len(self.sentinels):
            raise ValueError(
                f"a sequence of {length} tokens gets {spans} noise spans but there are only "
                f"{len(self.sentinels)} sentinels: reserve more extra ids or use shorter sequences"
            )
        if spans == 0:
            return torch.zeros(length, dtype=torch.bool)
        runs = torch.stack(
            [_segment_lengths(length - noise, spans, generator), _segment_lengths(noise, spans, generator)], 1
        ).flatten()  # (2 * spans,): kept, noise, kept, noise, ...
        run_starts = torch.zeros(length, dtype=torch.long)
        run_starts[runs.cumsum(0)[:-1]] = 1  # (L,): 1 where the 2nd, 3rd, ... run starts
        return run_starts.cumsum(0) % 2 == 1  # odd runs are noise

    def __call__(
        self, ids: Sequence[int] | Tensor, generator: torch.Generator | None = None
    ) -> tuple[list[int], list[int]]:
        """Token ids (no EOS) -> (input ids, target ids), each ending with EOS."""
        tokens = torch.as_tensor(ids, dtype=torch.long)  # (L,)
        noise = self.noise_mask(len(tokens), generator)  # (L,)
        previous = torch.zeros_like(noise)
        previous[1:] = noise[:-1]
        starts = noise & ~previous  # (L,): first token of each span
        span = torch.cumsum(starts.long(), 0) - 1  # (L,): index of the span a token is in
        sentinel = torch.where(starts, self.sentinels[span.clamp(min=0)], _NONE)  # (L,)
        inputs = torch.stack([sentinel, torch.where(noise, _NONE, tokens)], 1).flatten()  # (2L,)
        targets = torch.stack([sentinel, torch.where(noise, tokens, _NONE)], 1).flatten()  # (2L,)
        eos = [self.eos_id]
        return inputs[inputs != _NONE].tolist() + eos, targets[targets != _NONE].tolist() + eos


def _segment_lengths(items: int, segments: int, generator: torch.Generator | None) -> Tensor:
    """(segments,) lengths >= 1 summing to `items`, cut uniformly at random (T5's random segmentation)."""
    cuts = torch.randperm(items - 1, generator=generator)[: segments - 1] + 1  # where segments 2.. start
    bounds = torch.cat([torch.tensor([0]), cuts.sort().values, torch.tensor([items])])
    return bounds.diff()


class SpanCorruptionCollator:
    """Corrupts rows of token ids and pads them into a seq2seq batch (see Seq2SeqCollator).

    Rows hold `input_ids` (a text's token ids without special tokens) and optionally an int `noise_seed`
    that fixes the row's corruption; rows without one are corrupted anew each time.
    """

    def __init__(self, corruptor: SpanCorruptor, pad_id: int, decoder_start_id: int) -> None:
        self.corruptor = corruptor
        self.seq2seq = Seq2SeqCollator(pad_id, decoder_start_id)

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """A batch of corrupted inputs, -100-padded targets as labels, and shifted decoder inputs."""
        corrupted = []
        for row in rows:
            seed = row.get("noise_seed")
            generator = None if seed is None else torch.Generator().manual_seed(int(seed))
            inputs, targets = self.corruptor(row["input_ids"], generator)
            corrupted.append({"input_ids": inputs, "labels": targets})
        return self.seq2seq(corrupted)
