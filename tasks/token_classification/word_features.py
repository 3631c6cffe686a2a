"""Lexical features of each word (lower-cased form, first and last letters, shape) as embedding rows.

A feature CRF reads a word through these; a tagger trained from scratch on a few thousand sentences has to learn
them from its subword pieces. Here each subword of a word also reads the summed rows of its word's features. Each
feature's values come from the training words (FeatureVocabulary); a value they do not show reads the feature's
"not kept" row, as a CRF gives an unseen feature no weight. (Hashing the values instead, as spaCy does, gave an
unseen name the row of a frequent word it collided with: "alice" read "away".)
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

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


def check_features(names: Sequence[str], min_count: int) -> None:
    """A ConfigError for an unknown feature name or a minimum count under one."""
    unknown = [name for name in names if name not in FEATURES]
    if unknown:
        raise ConfigError(f"--data.word_features: unknown {unknown}; known: {', '.join(FEATURES)}")
    if min_count < 1:
        raise ConfigError(f"--data.word_feature_min_count {min_count}: must be 1 or more")


@dataclass(frozen=True)
class FeatureVocabulary:
    """Each feature's values kept from the training words (seen `min_count` times or more), most frequent first.

    Rows of the feature table: 0 reads nothing (specials, context, padding); then per feature one row for a value
    not kept (so an unseen name reads "an unseen word", never another word's row) and one per kept value.
    """

    values: dict[str, list[str]]

    @classmethod
    def count(cls, sentences: Iterable[Sequence[str]], names: Sequence[str], min_count: int) -> FeatureVocabulary:
        """The values of `names` that the words of `sentences` show at least `min_count` times."""
        words = [w for sentence in sentences for w in sentence]
        counts = {name: Counter(FEATURES[name](w) for w in words) for name in names}
        return cls({name: _kept(counts[name], min_count) for name in names})

    @cached_property
    def starts(self) -> list[int]:
        """Each feature's first row (its row for a value not kept)."""
        sizes = [1 + len(values) for values in self.values.values()]
        return [1 + sum(sizes[:k]) for k in range(len(sizes))]

    @cached_property
    def index(self) -> list[dict[str, int]]:
        """Per feature, value -> row."""
        return [
            {value: start + 1 + i for i, value in enumerate(values)}
            for start, values in zip(self.starts, self.values.values(), strict=True)
        ]

    @property
    def rows(self) -> int:
        """Rows of the feature table, the padding row included."""
        return 1 + sum(1 + len(values) for values in self.values.values())

    def ids(self, word: str) -> list[int]:
        """The word's row in each feature's part of the table."""
        return [
            index.get(FEATURES[name](word), start)
            for name, start, index in zip(self.values, self.starts, self.index, strict=True)
        ]

    def digest(self) -> str:
        """A short hash of the values: row stores built with other values are rebuilt."""
        return hashlib.sha256(json.dumps(self.state(), ensure_ascii=False).encode()).hexdigest()[:16]

    def state(self) -> dict[str, list[str]]:
        """Plain data for the checkpoint's data spec."""
        return {name: list(values) for name, values in self.values.items()}


def _kept(counts: Counter[str], min_count: int) -> list[str]:
    """Values counted at least `min_count` times, most frequent first, ties by value (the same every run)."""
    return [value for value, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n >= min_count]


def piece_features(words: Sequence[str], word_of: Sequence[int], vocabulary: FeatureVocabulary) -> list[list[int]]:
    """Per subword, its word's feature rows (`word_of[i]` the sentence word of subword i, -100 for none)."""
    rows = [vocabulary.ids(word) for word in words]
    empty = [NO_FEATURE] * len(vocabulary.values)
    return [rows[w] if w != IGNORE_INDEX else empty for w in word_of]


class WordFeatureEmbedding(nn.Module):
    """(B, T, K) feature rows -> (B, T, D), the sum of the K features' vectors (row 0 reads zeros)."""

    def __init__(self, rows: int, d_model: int) -> None:
        super().__init__()
        self.rows = nn.Embedding(rows, d_model, padding_idx=NO_FEATURE)

    def forward(self, ids: Tensor) -> Tensor:
        return self.rows(ids).sum(-2)  # (B, T, K, D) -> (B, T, D)

    def reset_padding(self) -> None:
        """Zero the padding row again (after an init that wrote every row)."""
        with torch.no_grad():
            self.rows.weight[NO_FEATURE].zero_()
