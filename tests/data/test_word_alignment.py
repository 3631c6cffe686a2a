"""Words to subword windows and back: one prediction per word, overlapping windows, nothing truncated."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from tetraformer.data import train_tokenizer
from tetraformer.data.collate import IGNORE_INDEX, PaddingCollator
from tetraformer.data.word_alignment import (
    SentenceBatches,
    fit_context,
    gather_words,
    owners,
    sentence_windows,
    window_spans,
    word_mask,
)

VOCAB = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "x", "yy"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    """A small WordPiece tokenizer: long words split into several subwords."""
    root = tmp_path_factory.mktemp("tok")
    rng = random.Random(0)
    (root / "t.txt").write_text("\n".join(" ".join(rng.choices(VOCAB[:6], k=8)) for _ in range(50)) + "\n")
    return train_tokenizer([root / "t.txt"], "wordpiece", 40, root / "wp")


def sentence(n: int, seed: int) -> list[str]:
    """n random words (some unseen by the tokenizer, so several subwords)."""
    return random.Random(seed).choices(VOCAB, k=n)


def test_first_subword_labelled_and_predictions_map_back(tokenizer) -> None:
    """One short sentence: one window; the first subword of each word carries its label, the rest -100."""
    words = ["alpha", "kappa", "theta", "x"]
    [window] = sentence_windows(tokenizer, words, [1, 2, 3, 4], max_length=64, stride=8)
    assert window.input_ids[0] == tokenizer.bos_token_id and window.input_ids[-1] == tokenizer.eos_token_id
    firsts = [i for i, w in enumerate(window.word_index) if w != IGNORE_INDEX]
    assert [window.word_index[i] for i in firsts] == [0, 1, 2, 3]
    assert [window.labels[i] for i in firsts] == [1, 2, 3, 4]
    assert sum(label != IGNORE_INDEX for label in window.labels) == 4
    assert len(window.input_ids) > 6  # some words were split, their other subwords unlabelled
    everything = sentence_windows(tokenizer, words, [1, 2, 3, 4], 64, 8, label_all_subwords=True)[0]
    assert sum(label != IGNORE_INDEX for label in everything.labels) == len(window.input_ids) - 2


@pytest.mark.parametrize(("n_words", "max_length", "stride"), [(40, 16, 4), (60, 12, 0), (25, 9, 6), (3, 64, 8)])
def test_windows_cover_long_sentences_once_per_word(tokenizer, n_words: int, max_length: int, stride: int) -> None:
    """Every window fits max_length; every word is predicted in exactly one window, with its own label."""
    words = sentence(n_words, n_words)
    labels = list(range(n_words))
    windows = sentence_windows(tokenizer, words, labels, max_length, stride)
    assert all(len(w.input_ids) <= max_length for w in windows)
    predicted = [w for window in windows for w in window.word_index if w != IGNORE_INDEX]
    assert sorted(predicted) == list(range(n_words))
    assert [label for window in windows for label in window.labels if label != IGNORE_INDEX] == predicted
    if n_words > 20:
        assert len(windows) > 1


def test_windows_overlap_by_at_most_stride_and_words_owned_where_most_context() -> None:
    """Spans overlap by up to `stride` subwords; a word in two spans belongs to the one with more context."""
    lengths = [1] * 10
    spans = window_spans(lengths, budget=4, stride=2)
    assert spans[0] == (0, 4) and spans[1] == (2, 6) and spans[-1][1] == 10
    owner = owners(lengths, spans)
    assert owner[2] == 0 and owner[3] == 1  # word 3: 0 words right of it in span 0, 1 left of it in span 1
    assert window_spans([5, 1, 1], budget=3, stride=1) == [(0, 1), (1, 3)]  # a word longer than the budget


def test_gather_words_reassembles_sentences_from_windows_of_a_batch(tokenizer) -> None:
    """Values at the predicting subwords of a sentence's windows come back as one row per sentence, in order."""
    sentences = [sentence(30, 1), sentence(5, 2), sentence(18, 3)]
    rows = []
    for number, words in enumerate(sentences):
        for window in sentence_windows(tokenizer, words, None, 12, 3):
            rows.append({"input_ids": window.input_ids, "word_index": window.word_index, "sentence": number})
    batch = PaddingCollator(0, pad_values={"word_index": IGNORE_INDEX})(rows)
    values = batch["word_index"] * 10  # the value a word's subword carries: 10 x its word index
    words = gather_words(values, batch["word_index"], batch["sentence"])  # (S, W)
    mask = word_mask(batch["word_index"], batch["sentence"])
    for number, words_of in enumerate(sentences):
        n = len(words_of)
        assert words[number, :n].tolist() == [10 * i for i in range(n)]
        assert mask[number].tolist() == [True] * n + [False] * (words.shape[1] - n)
    scores = torch.randn(*batch["word_index"].shape, 3)  # (B, T, L) keeps its last dimension
    assert gather_words(scores, batch["word_index"], batch["sentence"], 0.0).shape == (3, 30, 3)


def test_sentence_batches_never_split_a_sentence() -> None:
    """Every batch holds all windows of its sentences; every row is used once; shuffled orders differ by epoch."""
    sentence_of = [0, 0, 1, 2, 2, 2, 3, 4, 5, 5]
    for sampler in (
        SentenceBatches(sentence_of, 2),
        SentenceBatches(sentence_of, 2, shuffle=True, seed=1),
        SentenceBatches(sentence_of, 2, True, lengths=list(range(10)), seed=1),
    ):
        batches = list(sampler)
        assert sorted(r for b in batches for r in b) == list(range(10)) and len(batches) == len(sampler) == 3
        for b in batches:
            assert all(sentence_of.count(sentence_of[r]) == sum(sentence_of[x] == sentence_of[r] for x in b) for r in b)
    shuffled = SentenceBatches(sentence_of, 1, shuffle=True, seed=3)
    first = list(shuffled)
    shuffled.set_epoch(1)
    assert list(shuffled) != first


def test_word_without_subwords_gets_unknown(tmp_path: Path) -> None:
    """A word the tokenizer drops entirely still gets a subword (unk) and so a prediction."""
    (tmp_path / "t.txt").write_text("abc abd\n")
    char = train_tokenizer([tmp_path / "t.txt"], "wordpiece", 30, tmp_path / "tok")
    [window] = sentence_windows(char, ["abc", "\u200b", "abd"], [0, 1, 2], 32, 4)
    assert [w for w in window.word_index if w != IGNORE_INDEX] == [0, 1, 2]


@pytest.mark.parametrize(("n_before", "n_after", "room"), [(10, 10, 6), (2, 10, 6), (10, 1, 7), (3, 2, 9), (4, 4, 0)])
def test_context_fills_the_room_half_each_side_and_lends_what_one_side_leaves(
    n_before: int, n_after: int, room: int
) -> None:
    """The nearest ids of each side: as much as fits, half the room each, a short side's rest to the other."""
    before, after = list(range(100, 100 + n_before)), list(range(200, 200 + n_after))
    kept_before, kept_after = fit_context(before, after, room)
    assert len(kept_before) + len(kept_after) == min(room, n_before + n_after)
    assert kept_before == before[len(before) - len(kept_before) :] and kept_after == after[: len(kept_after)]
    assert min(len(kept_before), len(kept_after)) >= min(room // 2, n_before, n_after)


def test_context_is_read_around_a_sentence_unlabelled(tokenizer) -> None:
    """A sentence that fits one window is read between its neighbours' ids; its own ids, labels and predictions are
    those it has alone; the window keeps to max_length; a sentence that needs several windows reads no context."""
    words, before, after = sentence(6, 7), list(range(20, 50)), list(range(60, 90))
    [alone] = sentence_windows(tokenizer, words, list(range(6)), 32, 4)
    [window] = sentence_windows(tokenizer, words, list(range(6)), 32, 4, context=(before, after))
    assert len(window.input_ids) == 32
    inner = alone.input_ids[1:-1]
    at = next(i for i in range(len(window.input_ids)) if window.input_ids[i : i + len(inner)] == inner)
    n_before, n_after = at - 1, 32 - 2 - len(inner) - (at - 1)
    assert window.input_ids[1:at] == before[-n_before:] and window.input_ids[at + len(inner) : -1] == after[:n_after]
    assert abs(n_before - n_after) <= 1
    assert window.input_ids[0] == alone.input_ids[0] and window.input_ids[-1] == alone.input_ids[-1]
    for field in ("word_index", "labels"):
        got = getattr(window, field)
        assert got[at : at + len(inner)] == getattr(alone, field)[1:-1]
        assert set(got[:at] + got[at + len(inner) :]) == {IGNORE_INDEX}
    long = sentence(40, 40)
    assert sentence_windows(tokenizer, long, None, 16, 4, context=(before, after)) == sentence_windows(
        tokenizer, long, None, 16, 4
    )
