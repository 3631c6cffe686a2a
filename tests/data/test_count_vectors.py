"""Word vectors counted from text: PPMI against a dense reference, the randomized SVD against an exact one, words of
shared contexts nearer than others, the same text giving the same vectors without touching the global streams."""

from __future__ import annotations

import math
import random
from collections import defaultdict

import numpy as np
import pytest
import torch

from tetraformer.data.count_vectors import (
    CountVectorOptions,
    cooccurrences,
    count_word_vectors,
    positive_pmi,
    randomized_svd,
)

CORPUS = [["a", "b", "c", "a"], ["b", "c"], ["c", "a", "d", "b", "a"]]


def dense_ppmi(sentences: list[list[str]], rows: dict[str, int], window: int, power: float) -> np.ndarray:
    """PPMI straight from its definition: pairs within `window` in a sentence, weighted 1/distance, both ways."""
    counts: dict[tuple[int, int], float] = defaultdict(float)
    for sentence in sentences:
        for i, left in enumerate(sentence):
            for j in range(i + 1, min(i + window + 1, len(sentence))):
                counts[rows[left], rows[sentence[j]]] += 1 / (j - i)
                counts[rows[sentence[j]], rows[left]] += 1 / (j - i)
    total = sum(counts.values())
    word = [sum(v for (w, _), v in counts.items() if w == k) / total for k in range(len(rows))]
    context = [sum(v for (_, c), v in counts.items() if c == k) ** power for k in range(len(rows))]
    context = [c / sum(context) for c in context]
    out = np.zeros((len(rows), len(rows)))
    for (w, c), v in counts.items():
        out[w, c] = max(0.0, math.log(v / total) - math.log(word[w]) - math.log(context[c]))
    return out


def test_positive_pmi_matches_its_definition() -> None:
    rows = {w: i for i, w in enumerate("abcd")}
    for window in (1, 2, 4):
        found = positive_pmi(cooccurrences(CORPUS, rows, window), 0.75).to_dense().numpy()
        np.testing.assert_allclose(found, dense_ppmi(CORPUS, rows, window, 0.75), atol=1e-12)


def test_pairs_never_span_two_sentences_and_unknown_words_break_nothing() -> None:
    rows = {"a": 0, "b": 1}  # "c" and "d" have no row: skipped as words and as contexts
    counts = cooccurrences([["a", "c", "b"], ["b"], ["a"]], rows, 3).to_dense()
    assert counts.tolist() == [[0.0, 0.5], [0.5, 0.0]]  # only a..b two places apart in the first sentence


def test_randomized_svd_finds_the_top_singular_values_and_vectors() -> None:
    generator = torch.Generator().manual_seed(1)
    left, right = torch.randn(60, 5, generator=generator), torch.randn(5, 40, generator=generator)
    matrix = left @ torch.diag(torch.tensor([9.0, 7.0, 5.0, 3.0, 1.0])) @ right
    matrix = (matrix + 0.01 * torch.randn(60, 40, generator=generator)).double()
    u, s = randomized_svd(matrix.to_sparse(), 3, power_iterations=4, seed=0)
    exact_u, exact_s, _ = torch.linalg.svd(matrix, full_matrices=False)
    torch.testing.assert_close(s, exact_s[:3], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close((u.T @ exact_u[:, :3]).abs(), torch.eye(3, dtype=u.dtype), rtol=0, atol=1e-6)


def contexts_corpus() -> list[list[str]]:
    """Names only ever in name contexts, colours only in colour contexts, in sentences drawn by a local generator."""
    draw = random.Random(0)
    names, colours = ["anna", "boris", "carl", "dora"], ["red", "green", "blue", "grey"]
    name_frames = [["{}", "said", "hello"], ["we", "met", "{}", "today"], ["ask", "{}", "to", "come"]]
    colour_frames = [["a", "{}", "car"], ["the", "wall", "is", "{}"], ["paint", "it", "{}", "now"]]
    sentences = []
    for _ in range(300):
        words, frames = (names, name_frames) if draw.random() < 0.5 else (colours, colour_frames)
        word = draw.choice(words)
        sentences.append([word if w == "{}" else w for w in draw.choice(frames)])
    return sentences


def test_words_of_shared_contexts_are_nearer_than_others() -> None:
    vectors = count_word_vectors(contexts_corpus(), CountVectorOptions(dims=8, window=3))
    unit = vectors.table / np.linalg.norm(vectors.table, axis=1, keepdims=True)

    def cosine(a: str, b: str) -> float:
        return float(unit[vectors.rows[a]] @ unit[vectors.rows[b]])

    groups = [["anna", "boris", "carl", "dora"], ["red", "green", "blue", "grey"]]
    for group, other in (groups, groups[::-1]):
        for word in group:
            nearest_other = max(cosine(word, o) for o in other)
            assert min(cosine(word, g) for g in group if g != word) > nearest_other + 0.5


def test_same_text_same_vectors_and_the_global_streams_untouched() -> None:
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    first = count_word_vectors(contexts_corpus(), CountVectorOptions(dims=6))
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.random.get_state()[1].tolist() == numpy_state[1].tolist()
    second = count_word_vectors(contexts_corpus(), CountVectorOptions(dims=6))
    assert first.rows == second.rows and np.array_equal(first.table, second.table)
    assert first.table.dtype == np.float32 and first.table.shape == (len(first.rows), 6)


def test_rare_words_get_no_vector_and_too_little_text_is_refused() -> None:
    vectors = count_word_vectors([*CORPUS, ["e"]], CountVectorOptions(dims=2, min_count=2))
    assert set(vectors.rows) == {"a", "b", "c"}  # "d" and "e" are seen once
    assert list(vectors.rows) == ["a", "b", "c"]  # most frequent first
    with pytest.raises(ValueError, match="seen 4\\+ times"):
        count_word_vectors(CORPUS, CountVectorOptions(min_count=4))  # only "a"


def test_counting_in_chunks_sums_to_counting_at_once() -> None:
    """Pairs summed over chunks of a few sentences equal the pairs of the whole text (the same keys, sums within
    rounding), and a one-pass generator gives the same vectors as a list."""
    rng = random.Random(3)
    sentences = [[rng.choice("abcdefgh") for _ in range(rng.randint(1, 9))] for _ in range(300)]
    rows = {w: i for i, w in enumerate("abcdefg")}  # "h" has no row
    whole = cooccurrences(sentences, rows, 3).coalesce()
    for chunk_words in (1, 7, 50):
        chunked = cooccurrences(sentences, rows, 3, chunk_words).coalesce()
        assert torch.equal(chunked.indices(), whole.indices())
        torch.testing.assert_close(chunked.values(), whole.values(), rtol=1e-12, atol=1e-12)
    options = CountVectorOptions(dims=3, chunk_words=40)
    listed = count_word_vectors(sentences, options)
    streamed = count_word_vectors((s for s in sentences), options)
    assert listed.rows == streamed.rows and np.array_equal(listed.table, streamed.table)
