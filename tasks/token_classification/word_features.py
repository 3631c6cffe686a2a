"""Hashed lexical features of each word (lower-cased form, first and last letters, shape) as embedding rows.

A feature CRF reads a word through these; a tagger trained from scratch on a few thousand sentences has to learn
them from its subword pieces. Here each subword of a word also reads the summed rows of its word's features, each
feature value hashed (crc32, the same in every process and run) into `buckets` rows of its own table, as spaCy's
hash embeddings do.
"""

from __future__ import annotations

import unicodedata
import zlib
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.errors import ConfigError

NO_FEATURE = 0  # the padding row: specials, context and padding read nothing


def word_shape(word: str) -> str:
    """The word's character classes, runs collapsed: Alice -> Xx, 1984 -> d, U.S. -> X.X., 東京タワー -> CK."""
    classes = [_char_class(c) for c in word]
    return "".join(c for i, c in enumerate(classes) if i == 0 or c != classes[i - 1])


def _char_class(char: str) -> str:
    """X upper, x lower, d digit, C kanji, h hiragana, K katakana; other characters stand for themselves."""
    if char.isdigit():
        return "d"
    if char.isupper():
        return "X"
    if char.islower():
        return "x"
    name = unicodedata.name(char, "")
    for prefix, mark in (("CJK", "C"), ("HIRAGANA", "h"), ("KATAKANA", "K")):
        if name.startswith(prefix):
            return mark
    return char


FEATURES: dict[str, Callable[[str], str]] = {
    "lower": str.lower,
    "prefix1": lambda w: w[:1],
    "prefix2": lambda w: w[:2],
    "prefix3": lambda w: w[:3],
    "suffix1": lambda w: w[-1:],
    "suffix2": lambda w: w[-2:],
    "suffix3": lambda w: w[-3:],
    "shape": word_shape,
}


def check_features(names: Sequence[str], buckets: int) -> None:
    """A ConfigError for an unknown feature name or fewer than one bucket."""
    unknown = [name for name in names if name not in FEATURES]
    if unknown:
        raise ConfigError(f"--data.word_features: unknown {unknown}; known: {', '.join(FEATURES)}")
    if buckets < 1:
        raise ConfigError(f"--data.word_feature_buckets {buckets}: must be 1 or more")


def feature_ids(word: str, names: Sequence[str], buckets: int) -> list[int]:
    """The word's row in each feature's table: 1 + table * buckets + crc32(name=value) mod buckets."""
    return [
        1 + k * buckets + zlib.crc32(f"{name}={FEATURES[name](word)}".encode()) % buckets
        for k, name in enumerate(names)
    ]


def piece_features(words: Sequence[str], word_of: Sequence[int], names: Sequence[str], buckets: int) -> list[list[int]]:
    """Per subword, its word's feature rows (`word_of[i]` the sentence word of subword i, -100 for none)."""
    rows = [feature_ids(word, names, buckets) for word in words]
    empty = [NO_FEATURE] * len(names)
    return [rows[w] if w != IGNORE_INDEX else empty for w in word_of]


class WordFeatureEmbedding(nn.Module):
    """(B, T, K) feature rows -> (B, T, D), the sum of the K features' vectors (row 0 reads zeros)."""

    def __init__(self, n_features: int, buckets: int, d_model: int) -> None:
        super().__init__()
        self.rows = nn.Embedding(1 + n_features * buckets, d_model, padding_idx=NO_FEATURE)

    def forward(self, ids: Tensor) -> Tensor:
        return self.rows(ids).sum(-2)  # (B, T, K, D) -> (B, T, D)

    def reset_padding(self) -> None:
        """Zero the padding row again (after an init that wrote every row)."""
        with torch.no_grad():
            self.rows.weight[NO_FEATURE].zero_()
