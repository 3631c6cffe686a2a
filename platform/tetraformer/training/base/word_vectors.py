"""Static word vectors as the token embedding's starting point: each whole-word token the vectors know starts
from its vector, projected onto the vectors' principal axes (GloVe- or fastText-initialised taggers do this)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from tetraformer.core.embeddings import TokenEmbedding
from tetraformer.data.word_vectors import WordVectors, read_word_vectors
from tetraformer.errors import ConfigError, above

log = logging.getLogger(__name__)
WORD_MARKERS = ("▁", "Ġ")  # SentencePiece's and byte-level BPE's word-start marks, dropped before lookup
CONTINUATION = "##"  # WordPiece's mark of a piece inside a word: no word of its own
LOW_COVERAGE = 0.1  # below this share of the vocabulary found, the run logs a warning


@dataclass
class WordVectorsConfig:
    """Start the token embedding from static word vectors: a text file (word2vec, fastText, GloVe) or a
    `vectors.npy` + `words.tsv` directory (`tetraformer.data.word_vectors`)."""

    path: str | None = None  # none: the embedding starts at random, as usual
    std: float = 0.1  # the projected rows are scaled to this standard deviation (random rows have init_std)
    freeze: bool = False  # the rows that start from vectors stay as they start (the other rows train)

    def __post_init__(self) -> None:
        """A positive std: an OptionError names the field."""
        above(self, 0, std=self.std)


def token_words(tokenizer: Any) -> list[str]:
    """The word each vocabulary id stands for, by id: its token without a word-start mark; "" for special
    tokens and WordPiece's `##` continuation pieces."""
    vocab = tokenizer.get_vocab()
    specials = set(tokenizer.all_special_tokens)
    words = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        if token in specials or token.startswith(CONTINUATION):
            continue
        words[index] = token[1:] if token[:1] in WORD_MARKERS else token  # a bare mark: ""
    return words


def projected(vectors: np.ndarray, width: int, std: float) -> tuple[np.ndarray, float]:
    """(N, D) vectors -> (N, min(D, width)): centred, on their top principal axes (each axis' largest entry
    positive, so no LAPACK's sign choice changes the start), scaled to `std`; with the share of variance kept."""
    centred = vectors.astype(np.float64) - vectors.mean(axis=0)
    _, singular, axes = np.linalg.svd(centred, full_matrices=False)
    k = min(width, axes.shape[0])
    axes = axes[:k] * np.sign(axes[np.arange(k), np.abs(axes[:k]).argmax(axis=1)])[:, None]  # signs fixed
    rows = centred @ axes.T  # (N, k)
    kept = float((singular[:k] ** 2).sum() / max((singular**2).sum(), 1e-12))
    return (rows / max(rows.std(), 1e-12) * std).astype(np.float32), kept


def start_from_word_vectors(net: nn.Module, tokenizer: Any, cfg: WordVectorsConfig) -> int:
    """Set the rows of the network's token embedding whose words `cfg.path` has a vector for; the count set.
    With fewer dims than the model's width, the vectors fill the first dims and the rest stay random."""
    if tokenizer is None:
        raise ConfigError("--model.word_vectors needs a text tokenizer; this task's data has none")
    embedding = next(m for m in net.modules() if isinstance(m, TokenEmbedding)).tokens
    vectors = read_word_vectors(cfg.path)
    words = token_words(tokenizer)[: embedding.num_embeddings]
    ids, rows = _found(words, vectors)
    named = sum(1 for w in words if w)
    if len(ids) < 2:
        raise ConfigError(f"{cfg.path} has vectors for {len(ids)} of the {named} words in the vocabulary")
    values, kept = projected(vectors.table[rows], embedding.embedding_dim, cfg.std)
    with torch.no_grad():
        embedding.weight[torch.tensor(ids), : values.shape[1]] = torch.from_numpy(values).to(embedding.weight.dtype)
    if cfg.freeze:
        keep_rows(embedding, ids)
    _log_coverage(cfg.path, len(ids), named, vectors.dims, values.shape[1], kept)
    return len(ids)


def keep_rows(embedding: nn.Embedding, ids: list[int]) -> None:
    """Zero the gradient of these rows at every backward pass, so they never move (embeddings take no weight
    decay, and AdamW moves a weight whose gradients were all zero by nothing). The mask is a buffer of the
    embedding (not saved), so it moves to the weight's device and dtype with the module."""
    trains = torch.ones(embedding.num_embeddings, 1, dtype=embedding.weight.dtype, device=embedding.weight.device)
    trains[torch.tensor(ids)] = 0.0
    embedding.register_buffer("trains", trains, persistent=False)
    embedding.weight.register_hook(lambda grad: grad * embedding.trains)


def _found(words: list[str], vectors: WordVectors) -> tuple[list[int], list[int]]:
    """(vocabulary ids, table rows) of the words found as written, else lower-cased (GloVe's are)."""
    ids, rows = vectors.vector_rows(words)
    seen = set(ids)
    lower_ids, lower_rows = vectors.vector_rows([w.lower() if i not in seen else "" for i, w in enumerate(words)])
    return ids + lower_ids, rows + lower_rows


def _log_coverage(path: str | None, found: int, named: int, dims: int, width: int, kept: float) -> None:
    """One line on what started from the vectors; a warning when little of the vocabulary did."""
    log.info(
        "word vectors: %d of %d vocabulary words start from %s (%d dims -> %d, %.0f%% of their variance)",
        *(found, named, path, dims, width, 100 * kept),
    )
    if found < LOW_COVERAGE * named:
        log.warning(
            "word vectors: only %d of %d vocabulary words are in %s; does the tokenizer split words as the "
            "vectors' text was split (case, word segmentation, subword pieces)?",
            *(found, named, path),
        )
