"""Static word vectors as the token embedding's start: which tokens are words, the projection, the rows set."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from tetraformer.core import TextEncoder, TransformerConfig
from tetraformer.data.tokenizer import train_tokenizer
from tetraformer.data.word_vectors import write_word_vectors
from tetraformer.errors import ConfigError, OptionError
from tetraformer.training.base.word_vectors import (
    WordVectorsConfig,
    projected,
    start_from_word_vectors,
    token_words,
)

WORDS = ["tokyo", "osaka", "kyoto", "went", "to", "the", "and", "saw"]


def tokenizer_of(tmp_path: Path, kind: str = "wordpiece") -> object:
    """A small tokenizer of `kind` trained on sentences of WORDS (each word whole in its vocabulary)."""
    text = tmp_path / "text.txt"
    text.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) * 20, encoding="utf-8")
    return train_tokenizer(str(text), kind, 120, tmp_path / f"tok_{kind}")


def embedding_rows(net: TextEncoder, tokenizer: object, words: list[str]) -> torch.Tensor:
    """(len(words), D) rows of the encoder's token embedding for whole words."""
    vocab = tokenizer.get_vocab()
    ids = [next(i for t, i in vocab.items() if t in (w, "▁" + w, "Ġ" + w)) for w in words]
    return net.embed.tokens.weight[ids].detach()


def test_token_words_skips_specials_and_continuations(tmp_path: Path) -> None:
    """Specials and `##` pieces name no word; SentencePiece's ▁ is dropped; ids index the list."""
    wordpiece = tokenizer_of(tmp_path)
    words = token_words(wordpiece)
    vocab = wordpiece.get_vocab()
    assert words[vocab["tokyo"]] == "tokyo"
    assert all(words[i] == "" for t, i in vocab.items() if t.startswith("##") or t in wordpiece.all_special_tokens)
    unigram = tokenizer_of(tmp_path, "unigram")
    assert "kyoto" in token_words(unigram) and not any(w.startswith("▁") for w in token_words(unigram))


def test_projection_keeps_geometry_and_scale() -> None:
    """Onto as many axes as there are dims, distances keep their ratios; the rows have the asked std; fewer
    axes keep the largest share of the variance."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 6)) * np.array([5, 4, 3, 0.1, 0.1, 0.1])
    rows, kept = projected(vectors, 16, 0.1)
    assert rows.shape == (50, 6) and kept == pytest.approx(1.0)
    assert rows.std() == pytest.approx(0.1, rel=1e-4)
    before = np.linalg.norm(vectors[:, None] - vectors[None], axis=-1)
    after = np.linalg.norm(rows[:, None] - rows[None], axis=-1)
    np.testing.assert_allclose(after[before > 0] / before[before > 0], after[0, 1] / before[0, 1], rtol=1e-4)
    three, kept3 = projected(vectors, 3, 0.1)
    assert three.shape == (50, 3) and 0.99 < kept3 < 1.0


def test_rows_start_from_vectors_and_the_rest_stay(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Words with a vector get its projection (equal vectors, equal rows; a capitalised entry found by its
    lower case); other rows keep their random start; one line says how many."""
    tokenizer = tokenizer_of(tmp_path)
    table = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]], np.float32)
    write_word_vectors(tmp_path / "v", table, {"tokyo": 0, "osaka": 1, "Kyoto": 2, "went": 2, "saw": 1})
    cfg = TransformerConfig(d_model=8, n_heads=2, n_layers=1, d_ff=16, vocab_size=len(tokenizer), max_len=16)
    torch.manual_seed(0)
    net = TextEncoder(cfg)
    before = net.embed.tokens.weight.detach().clone()
    with caplog.at_level(logging.INFO):
        found = start_from_word_vectors(net, tokenizer, WordVectorsConfig(str(tmp_path / "v"), std=0.5))
    assert found == 4  # tokyo, osaka, went, saw; Kyoto is not kyoto's entry (exact, then lower-cased vocabulary)
    tokyo, osaka, went, saw = embedding_rows(net, tokenizer, ["tokyo", "osaka", "went", "saw"])
    assert torch.equal(osaka[:3], saw[:3]) and not torch.equal(tokyo[:3], went[:3])
    assert torch.equal(tokyo[3:], before[tokenizer.get_vocab()["tokyo"], 3:])  # 3 dims: the rest stay random
    untouched = embedding_rows(net, tokenizer, ["the", "and"])
    assert torch.equal(untouched, before[[tokenizer.get_vocab()[w] for w in ("the", "and")]])
    assert any("4 of" in r.getMessage() and "start from" in r.getMessage() for r in caplog.records)


def test_lower_case_lookup_and_low_coverage_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A vocabulary word found only lower-cased in the vectors still starts from it; little coverage warns."""
    tokenizer = tokenizer_of(tmp_path)
    cfg = TransformerConfig(d_model=4, n_heads=2, n_layers=1, d_ff=8, vocab_size=len(tokenizer), max_len=16)
    net = TextEncoder(cfg)
    write_word_vectors(tmp_path / "few", np.eye(2, dtype=np.float32), {"tokyo": 0, "osaka": 1})
    with caplog.at_level(logging.INFO):
        assert start_from_word_vectors(net, tokenizer, WordVectorsConfig(str(tmp_path / "few"))) == 2
    assert any(r.levelno == logging.WARNING and "only 2 of" in r.getMessage() for r in caplog.records)
    upper = tmp_path / "upper.txt"
    upper.write_text("TOKYO 1 0\nosaka 0 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="has vectors for 1 of the"):
        start_from_word_vectors(net, tokenizer, WordVectorsConfig(str(upper)))


def test_refusals(tmp_path: Path) -> None:
    """No tokenizer, a std of 0, and word vectors beside init_from are refused with the option named."""
    net = TextEncoder(TransformerConfig(d_model=4, n_heads=2, n_layers=1, d_ff=8, vocab_size=10, max_len=8))
    with pytest.raises(ConfigError, match="needs a text tokenizer"):
        start_from_word_vectors(net, None, WordVectorsConfig("x"))
    with pytest.raises(OptionError, match="std"):
        WordVectorsConfig("x", std=0.0)
    from tasks.token_classification.module import TokenClassification

    with pytest.raises(ConfigError, match="word_vectors starts a network from scratch"):
        TokenClassification(init_from=str(tmp_path), word_vectors=WordVectorsConfig("x"))


def test_frozen_rows_stay_and_the_others_train(tmp_path: Path) -> None:
    """With `freeze`, AdamW steps leave the vector rows exactly as they started; rows without a vector move."""
    tokenizer = tokenizer_of(tmp_path)
    write_word_vectors(tmp_path / "v", np.eye(3, dtype=np.float32), {"tokyo": 0, "osaka": 1, "kyoto": 2})
    cfg = TransformerConfig(d_model=8, n_heads=2, n_layers=1, d_ff=16, vocab_size=len(tokenizer), max_len=16)
    net = TextEncoder(cfg)
    start_from_word_vectors(net, tokenizer, WordVectorsConfig(str(tmp_path / "v"), freeze=True))
    before = net.embed.tokens.weight.detach().clone()
    optimizer = torch.optim.AdamW(net.parameters(), lr=0.1, weight_decay=0.0)
    ids = torch.tensor([tokenizer(" ".join(WORDS))["input_ids"]])
    for _ in range(3):
        optimizer.zero_grad()
        net(ids).last_hidden_state[..., 0].sum().backward()
        optimizer.step()
    vocab = tokenizer.get_vocab()
    after = net.embed.tokens.weight.detach()
    for word in ("tokyo", "osaka", "kyoto"):
        assert torch.equal(after[vocab[word]], before[vocab[word]]), word
    assert not torch.equal(after[vocab["went"]], before[vocab["went"]])


def test_projection_does_not_depend_on_the_axes_signs(monkeypatch: pytest.MonkeyPatch) -> None:
    """An SVD that returns some axes negated (LAPACK builds may) gives the same start."""
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(30, 5)) * np.array([4, 3, 2, 1, 0.5])
    rows, _ = projected(vectors, 3, 0.1)
    svd = np.linalg.svd

    def flipped(a: np.ndarray, full_matrices: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        u, sv, vt = svd(a, full_matrices=full_matrices)
        signs = np.array([-1.0, 1.0, -1.0, -1.0, 1.0])[: vt.shape[0]]
        return u * signs, sv, vt * signs[:, None]

    monkeypatch.setattr(np.linalg, "svd", flipped)
    np.testing.assert_array_equal(projected(vectors, 3, 0.1)[0], rows)
