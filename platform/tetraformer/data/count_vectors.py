"""Word vectors counted from your own text: positive PMI of word co-occurrences, reduced by a truncated SVD.

Levy, Goldberg and Dagan (2015) showed that this count-based recipe, with word2vec's tricks (context counts
smoothed by a power of 0.75, nearer words weighted more, the singular values' square root), comes close to skip-gram
on word similarity. It needs no training loop: a few million words are counted and reduced in about a minute on one
CPU core, and the same text gives the same vectors run after run (the SVD's random probe comes from its own seeded
generator, never the global one).

The text is read twice (word counts, then pairs) and never held whole: pairs are summed chunk by chunk, so memory
follows the distinct words and pairs, not the length of the text.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tetraformer.data.word_vectors import WordVectors

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CountVectorOptions:
    """How words are counted and how far the table is reduced."""

    dims: int = 300
    window: int = 5  # words on each side; a word d places away counts 1/d
    min_count: int = 2  # rarer words get no vector
    context_power: float = 0.75  # smooths the context distribution, as word2vec's negative sampling does
    power_iterations: int = 4  # of the randomized SVD; more sharpen the smaller singular vectors
    seed: int = 0  # the randomized SVD's probe
    chunk_words: int = 4_000_000  # words whose pairs are summed at once (a text this long is counted in one go)


def count_word_vectors(sentences: Iterable[Sequence[str]], options: CountVectorOptions | None = None) -> WordVectors:
    """PPMI + SVD vectors of every word seen `min_count` times or more, most frequent first. `sentences` is
    iterated twice: a list, or an iterable that reads its files afresh each time (a one-pass iterator is listed)."""
    options = options or CountVectorOptions()
    if iter(sentences) is sentences:  # a generator or other one-pass iterator
        sentences = list(sentences)
    counts: Counter[str] = Counter()
    sentence_count = 0
    for sentence in sentences:
        counts.update(sentence)
        sentence_count += bool(sentence)
    vocab = [word for word, count in counts.most_common() if count >= options.min_count]
    if len(vocab) < 2:
        raise ValueError(f"the text holds {len(vocab)} word(s) seen {options.min_count}+ times; vectors need more")
    rows = {word: i for i, word in enumerate(vocab)}
    ppmi = positive_pmi(cooccurrences(sentences, rows, options.window, options.chunk_words), options.context_power)
    dims = min(options.dims, len(vocab) - 1)
    u, s = randomized_svd(ppmi, dims, options.power_iterations, options.seed)
    table = (u * s.sqrt()).numpy().astype(np.float32)  # (words, dims)
    log.info(
        "counted %d words of %d sentences -> %d vectors of %d dims", sum(counts.values()), sentence_count, *table.shape
    )
    return WordVectors(table, rows)


def cooccurrences(
    sentences: Iterable[Sequence[str]],
    rows: dict[str, int],
    window: int,
    chunk_words: int = CountVectorOptions.chunk_words,
) -> torch.Tensor:
    """(words, words) sparse counts of word pairs at most `window` apart in a sentence, weighted 1/distance,
    summed over chunks of about `chunk_words` words."""
    n = len(rows)
    keys, sums = np.empty(0, dtype=np.int64), np.empty(0)
    for ids in word_id_chunks(sentences, rows, window, chunk_words):
        keys, sums = merged(keys, sums, *pair_sums(ids, n, window))
    index = torch.from_numpy(np.stack([keys // n, keys % n]))
    return torch.sparse_coo_tensor(index, torch.from_numpy(sums), (n, n), is_coalesced=True, check_invariants=False)


def word_id_chunks(
    sentences: Iterable[Sequence[str]], rows: dict[str, int], window: int, chunk_words: int
) -> Iterator[np.ndarray]:
    """The text as row ids (-1: no row), `window` -1s after each sentence so that no pair spans two, in chunks
    of whole sentences about `chunk_words` ids long."""
    pad = [-1] * window
    ids: list[int] = []
    for sentence in sentences:
        if sentence:
            ids += [rows.get(word, -1) for word in sentence]
            ids += pad
        if len(ids) >= chunk_words:
            yield np.asarray(ids, dtype=np.int64)
            ids = []
    if ids:
        yield np.asarray(ids, dtype=np.int64)


def pair_sums(ids: np.ndarray, n: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct pair keys w * n + c, their summed 1/distance weights) of one chunk of row ids."""
    keys, weights = [], []
    for distance in range(1, window + 1):
        left, right = ids[:-distance], ids[distance:]
        both = (left >= 0) & (right >= 0)
        left, right = left[both], right[both]
        keys += [left * n + right, right * n + left]  # symmetric: each word is the other's context
        weights.append(np.full(2 * len(left), 1.0 / distance))
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    return unique, np.bincount(inverse, weights=np.concatenate(weights))


def merged(
    keys: np.ndarray, sums: np.ndarray, new_keys: np.ndarray, new_sums: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two (sorted distinct keys, sums) tables as one: the sums of shared keys added in place, new keys inserted
    in order (no re-sort of the running table); the first chunk's is taken as it is."""
    if not len(keys):
        return new_keys, new_sums
    at = np.searchsorted(keys, new_keys)  # (new,) where each new key stands or would stand
    shared = at < len(keys)
    shared[shared] = keys[at[shared]] == new_keys[shared]
    sums[at[shared]] += new_sums[shared]  # distinct positions: the new keys are distinct
    fresh = ~shared
    return np.insert(keys, at[fresh], new_keys[fresh]), np.insert(sums, at[fresh], new_sums[fresh])


def positive_pmi(counts: torch.Tensor, context_power: float) -> torch.Tensor:
    """max(0, log p(w, c) / (p(w) p_a(c))) of sparse counts, with contexts' probabilities smoothed by power a."""
    (word, context), values = counts.indices(), counts.values()
    total = values.sum()
    word_p = torch.zeros(counts.shape[0], dtype=values.dtype).index_add_(0, word, values) / total
    context_p = torch.zeros(counts.shape[1], dtype=values.dtype).index_add_(0, context, values) ** context_power
    context_p = context_p / context_p.sum()
    pmi = (values / total).log() - word_p[word].log() - context_p[context].log()
    keep = pmi > 0
    index = torch.stack([word[keep], context[keep]])
    return torch.sparse_coo_tensor(index, pmi[keep], counts.shape, is_coalesced=True, check_invariants=False)


def randomized_svd(
    matrix: torch.Tensor, rank: int, power_iterations: int, seed: int, oversample: int = 10
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top `rank` left singular vectors (n, rank) and values (rank,) of a sparse (n, m) matrix (Halko et al.)."""
    generator = torch.Generator().manual_seed(seed)
    width = min(rank + oversample, min(matrix.shape))
    probe = torch.randn(matrix.shape[1], width, generator=generator, dtype=matrix.dtype)  # (m, width)
    transposed = matrix.t().coalesce()
    basis = torch.linalg.qr(matrix @ probe).Q  # (n, width)
    for _ in range(power_iterations):
        basis = torch.linalg.qr(matrix @ torch.linalg.qr(transposed @ basis).Q).Q
    small = (transposed @ basis).t()  # (width, m) = basis^T matrix
    u_small, s, _ = torch.linalg.svd(small, full_matrices=False)
    return (basis @ u_small)[:, :rank], s[:rank]
