"""BERT masking: 15% chosen, 80/10/10, never specials or padding, whole words, dynamic vs seeded masks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tetraformer.data import IGNORE_INDEX, train_tokenizer
from tetraformer.data.masking import MaskingCollator, TokenMasker, word_ids_from_starts, word_starts

PAD, CLS, SEP, MASK = 0, 2, 3, 4
SPECIALS = (0, 1, 2, 3, 4)
VOCAB = 1000


@pytest.fixture
def wordpiece_tokenizer(tmp_path: Path) -> Any:
    """A small WordPiece tokenizer: long words split into `##` pieces."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the token is believable and tokens are unbelievable\n" * 20, encoding="utf-8")
    return train_tokenizer([corpus], "wordpiece", 40, tmp_path / "tokenizer")


def masker(**options: float) -> TokenMasker:
    """A masker over a 1000-token vocabulary whose ids 0-4 are special."""
    return TokenMasker(MASK, SPECIALS, VOCAB, **options)


def batch(rows: int = 400, length: int = 128, seed: int = 0) -> torch.Tensor:
    """(rows, length) ids `[CLS] ... [SEP]` of random non-special tokens, every other row padded to half length."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, length), generator=g)
    ids[:, 0], ids[:, -1] = CLS, SEP
    ids[::2, length // 2 :] = PAD
    ids[::2, length // 2 - 1] = SEP
    return ids


def test_proportions_on_a_large_sample() -> None:
    """15% of maskable tokens chosen; of those 80% [MASK], 10% random, 10% kept; labels -100 elsewhere."""
    ids = batch()
    masked, labels = masker()(ids, generator=torch.Generator().manual_seed(1))
    maskable = ~torch.isin(ids, torch.tensor(SPECIALS))
    chosen = labels != IGNORE_INDEX
    assert chosen.sum() / maskable.sum() == pytest.approx(0.15, abs=0.005)  # ~38k maskable tokens
    assert not (chosen & ~maskable).any()  # never a special token nor padding
    assert torch.equal(labels[chosen], ids[chosen])  # labels are the original ids
    assert torch.equal(masked[~chosen], ids[~chosen])  # unchosen tokens are untouched
    n = chosen.sum().item()
    became_mask = (masked[chosen] == MASK).sum().item() / n
    kept = (masked[chosen] == ids[chosen]).sum().item() / n
    randomised = 1 - became_mask - kept
    assert became_mask == pytest.approx(0.8, abs=0.015)
    assert kept == pytest.approx(0.1 + 0.1 / (VOCAB - 5), abs=0.01)  # a random draw may hit the original
    assert randomised == pytest.approx(0.1, abs=0.01)
    replacements = masked[chosen & (masked != MASK) & (masked != ids)]
    assert not torch.isin(replacements, torch.tensor(SPECIALS)).any()  # random tokens are never specials


def test_other_probability_and_split() -> None:
    """mlm_probability and the mask/random fractions are honoured."""
    ids = batch(rows=200)
    masked, labels = masker(mlm_probability=0.4, mask_fraction=1.0, random_fraction=0.0)(
        ids, generator=torch.Generator().manual_seed(2)
    )
    chosen = labels != IGNORE_INDEX
    maskable = ~torch.isin(ids, torch.tensor(SPECIALS))
    assert chosen.sum() / maskable.sum() == pytest.approx(0.4, abs=0.01)
    assert (masked[chosen] == MASK).all()


def test_dynamic_masks_differ_and_seeds_repeat() -> None:
    """Two draws mask different positions; the same seed gives the same masks."""
    ids, m = batch(rows=8), masker()
    first, second = m(ids)[1], m(ids)[1]
    assert not torch.equal(first != IGNORE_INDEX, second != IGNORE_INDEX)
    seeded = [m(ids, generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(seeded[0][0], seeded[1][0]) and torch.equal(seeded[0][1], seeded[1][1])


def test_whole_word_masking_masks_every_piece_of_a_chosen_word() -> None:
    """A word's pieces are chosen together; the token share stays near mlm_probability."""
    g = torch.Generator().manual_seed(3)
    rows, length = 300, 100
    ids = torch.randint(5, VOCAB, (rows, length), generator=g)
    ids[:, 0], ids[:, -1] = CLS, SEP
    starts = torch.rand(rows, length, generator=g) < 0.4  # words of 1-several pieces
    maskable = masker().maskable(ids)
    words = word_ids_from_starts(starts, maskable)
    _, labels = masker()(ids, words, generator=g)
    chosen = labels != IGNORE_INDEX
    for r in range(rows):
        for w in words[r].unique():
            if w < 0:
                continue
            in_word = chosen[r][words[r] == w]
            assert in_word.all() or not in_word.any()  # all pieces or none
    assert chosen.sum() / maskable.sum() == pytest.approx(0.15, abs=0.01)
    assert not chosen[~maskable].any()


def test_word_ids_from_starts() -> None:
    """Continuation pieces share the word before them; specials and padding get -1 and end words."""
    ids = torch.tensor([[CLS, 10, 11, 12, SEP, 13, 14, SEP, PAD]])
    starts = torch.tensor([[0, 1, 0, 1, 0, 0, 1, 0, 0]], dtype=torch.bool)
    words = word_ids_from_starts(starts, masker().maskable(ids))
    w = words[0].tolist()
    assert w[0] == w[4] == w[7] == w[8] == -1
    assert w[1] == w[2] != w[3]  # "10 ##11" is one word, 12 another
    assert w[5] not in (w[1], w[3]) and w[5] != w[6]  # a piece after [SEP] begins a new word


def test_word_starts_from_fast_tokenizer_word_ids(wordpiece_tokenizer: Any) -> None:
    """word_ids() of a WordPiece encoding mark `##` pieces as continuations."""
    encoding = wordpiece_tokenizer("unbelievable tokens believe", add_special_tokens=False)
    tokens = encoding.tokens()
    flags = word_starts(encoding.word_ids())
    assert flags[0] and any(t.startswith("##") for t in tokens)
    for token, flag in zip(tokens, flags, strict=True):
        assert flag == (not token.startswith("##"))


def test_collator_pads_masks_and_seeds_evaluation_rows() -> None:
    """Rows are padded (labels -100 on padding); rows with mask_seed get the same masks every time."""
    rows = [
        {"input_ids": [CLS, *range(10, 40), SEP], "word_starts": [0] + [1] * 30 + [0]},
        {"input_ids": [CLS, *range(50, 60), SEP], "word_starts": [0] + [1] * 10 + [0]},
    ]
    collate = MaskingCollator(masker(mlm_probability=0.5), PAD, whole_word=True)
    out = collate(rows)
    assert out["input_ids"].shape == out["labels"].shape == out["attention_mask"].shape == (2, 32)
    assert "word_starts" not in out
    assert (out["labels"][1, 12:] == IGNORE_INDEX).all() and not out["attention_mask"][1, 12:].any()
    seeded = [{**row, "mask_seed": 5} for row in rows]
    assert torch.equal(collate(seeded)["labels"], collate(seeded)["labels"])
    draws = {tuple(collate(rows)["labels"].flatten().tolist()) for _ in range(5)}
    assert len(draws) > 1


@pytest.mark.parametrize(
    ("options", "message"),
    [(dict(mlm_probability=0.0), "mlm_probability"), (dict(mask_fraction=0.9, random_fraction=0.2), "sum")],
)
def test_bad_options_are_refused(options: dict, message: str) -> None:
    """Probabilities outside their range are errors naming the option."""
    with pytest.raises(ValueError, match=message):
        masker(**options)
