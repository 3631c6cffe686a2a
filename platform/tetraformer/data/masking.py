"""BERT's masking of token batches for masked-LM training, drawn anew each time a batch is built.

Of the maskable tokens (never specials or padding) `mlm_probability` are chosen, each independently as in
Hugging Face's DataCollatorForLanguageModeling; of the chosen, 80% become the mask token, 10% a random
non-special token and 10% stay as they are. Labels hold the original id at chosen positions, -100 elsewhere.

Whole-word masking chooses words instead of tokens, each with `mlm_probability`, and masks all of a chosen
word's pieces, so a token is still chosen with probability `mlm_probability`. Words come from the fast
tokenizer's `word_ids()` when the text is encoded (`word_starts`), so they work for every tokenizer type
(WordPiece, BPE, Unigram), not only for WordPiece's `##` continuation pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from tetraformer.data.collate import IGNORE_INDEX, PaddingCollator


class TokenMasker:
    """Masks a (B, T) batch of ids the BERT way; seeded through an optional torch.Generator."""

    def __init__(
        self,
        mask_id: int,
        special_ids: Iterable[int],
        vocab_size: int,
        mlm_probability: float = 0.15,
        mask_fraction: float = 0.8,
        random_fraction: float = 0.1,
    ) -> None:
        if not 0.0 < mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be between 0 and 1 (exclusive), got {mlm_probability}")
        if mask_fraction < 0 or random_fraction < 0 or mask_fraction + random_fraction > 1:
            raise ValueError(
                f"mask_fraction={mask_fraction} and random_fraction={random_fraction} must be >= 0 with sum <= 1"
            )
        self.mask_id, self.vocab_size = mask_id, vocab_size
        specials = set(special_ids)
        self.special_ids = torch.tensor(sorted(specials), dtype=torch.long)
        self.random_ids = torch.tensor(
            [i for i in range(vocab_size) if i not in specials], dtype=torch.long
        )  # the non-special tokens a chosen token may become
        if len(self.random_ids) == 0:
            raise ValueError("the vocabulary has no non-special token to draw random replacements from")
        self.mlm_probability, self.mask_fraction, self.random_fraction = (
            mlm_probability,
            mask_fraction,
            random_fraction,
        )

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, **options: Any) -> TokenMasker:
        """A masker for a Hugging Face tokenizer: its mask token, its special ids and its vocabulary."""
        if tokenizer.mask_token_id is None:
            raise ValueError("the tokenizer has no mask token; masked-LM training needs one (e.g. <mask>)")
        return cls(tokenizer.mask_token_id, tokenizer.all_special_ids, len(tokenizer), **options)

    def maskable(self, input_ids: Tensor) -> Tensor:
        """(B, T) ids -> (B, T) bool: True where a token may be chosen (not special, not padding)."""
        return ~torch.isin(input_ids, self.special_ids.to(input_ids.device))

    def __call__(
        self,
        input_ids: Tensor,
        word_ids: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(B, T) ids [, (B, T) word ids] -> masked (B, T) ids and (B, T) labels (-100 where not chosen)."""
        maskable = self.maskable(input_ids)  # (B, T)
        chosen = self.choose(maskable, word_ids, generator)  # (B, T)
        labels = torch.where(chosen, input_ids, IGNORE_INDEX)
        # one draw per position splits the chosen tokens 80 / 10 / 10 into mask / random / keep
        fate = torch.rand(input_ids.shape, generator=generator)
        to_mask = chosen & (fate < self.mask_fraction)
        to_random = chosen & ~to_mask & (fate < self.mask_fraction + self.random_fraction)
        random_tokens = self.random_ids[
            torch.randint(len(self.random_ids), input_ids.shape, generator=generator)
        ]  # (B, T)
        masked = torch.where(to_mask, self.mask_id, input_ids)
        masked = torch.where(to_random, random_tokens, masked)
        return masked, labels

    def choose(self, maskable: Tensor, word_ids: Tensor | None, generator: torch.Generator | None) -> Tensor:
        """(B, T) bool of the chosen positions: tokens, or every piece of the chosen words."""
        if word_ids is None:
            return maskable & (torch.rand(maskable.shape, generator=generator) < self.mlm_probability)
        n_words = int(word_ids.max()) + 1 if word_ids.numel() else 0
        word_chosen = torch.rand((len(word_ids), max(n_words, 1)), generator=generator) < self.mlm_probability
        picked = word_chosen.gather(1, word_ids.clamp(min=0))  # (B, T): each piece takes its word's draw
        return maskable & (word_ids >= 0) & picked


def word_ids_from_starts(word_starts: Tensor, maskable: Tensor) -> Tensor:
    """(B, T) word-start flags and maskable mask -> (B, T) word index per row, -1 where not maskable.

    A maskable token that starts no word continues the word before it.
    """
    starts = word_starts.bool() | ~maskable  # a special token ends any word before it
    ids = torch.cumsum(starts.long(), dim=1) - 1  # (B, T)
    return torch.where(maskable, ids, -1)


def word_starts(word_ids: Sequence[int | None]) -> list[bool]:
    """Per token of one encoding: True where a new word starts (from the fast tokenizer's `word_ids()`)."""
    return [w is not None and (i == 0 or w != word_ids[i - 1]) for i, w in enumerate(word_ids)]


class MaskingCollator:
    """Pads rows and masks them: new masks for every batch, or fixed ones for rows that carry a `mask_seed`.

    Rows hold `input_ids` and optionally `word_starts` (for whole-word masking), `token_type_ids` and any
    field PaddingCollator handles. Evaluation rows carry an int `mask_seed`, so validation and test see the
    same masks at every epoch; training rows carry none and get fresh masks each time (dynamic masking).
    """

    def __init__(self, masker: TokenMasker, pad_id: int, whole_word: bool = False) -> None:
        self.masker, self.whole_word = masker, whole_word
        self.pad = PaddingCollator(pad_id, pad_values={"word_starts": 0})

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """A padded batch whose `input_ids` are masked and whose `labels` hold the chosen tokens' ids."""
        batch = self.pad(rows)
        seeds, starts = batch.pop("mask_seed", None), batch.pop("word_starts", None)
        generator = None if seeds is None else torch.Generator().manual_seed(int(seeds[0]))
        ids = batch["input_ids"]  # (B, T)
        word_ids = None
        if self.whole_word:
            if starts is None:
                raise ValueError("whole-word masking needs `word_starts` in every row")
            word_ids = word_ids_from_starts(starts, self.masker.maskable(ids))
        batch["input_ids"], batch["labels"] = self.masker(ids, word_ids, generator)
        return batch
