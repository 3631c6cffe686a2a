"""Tagged sentences -> the tables of the task's row store: the sentences as read, and their subword windows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.conll import TaggedSentence
from tetraformer.data.records import LINE_COLUMN, SOURCE_COLUMN
from tetraformer.data.word_alignment import batch_word_pieces, sentence_windows

if TYPE_CHECKING:
    from datasets import Dataset

Batch = dict[str, list[Any]]


def sentence_table(sentences: list[TaggedSentence], labelled: bool) -> Dataset:
    """The sentences as read: words, canonical tags (when labelled), fields (JSON), file, first line, layout."""
    from datasets import Dataset

    columns: Batch = {
        "tokens": [s.tokens for s in sentences],
        "fields": [json.dumps(s.fields, default=str) for s in sentences],
        SOURCE_COLUMN: [s.source for s in sentences],
        LINE_COLUMN: [s.line for s in sentences],
        "per_line": [s.per_line for s in sentences],
    }
    if labelled:
        columns["tags"] = [s.tags for s in sentences]
    return Dataset.from_dict(columns)


def neighbour_words(sentences: Sequence[TaggedSentence], n: int) -> tuple[list[list[str]], list[list[str]]]:
    """Up to `n` words before and after each sentence, from the sentences beside it in its file and document."""
    return _nearest_words(sentences, n, backwards=False), _nearest_words(sentences, n, backwards=True)


def _nearest_words(sentences: Sequence[TaggedSentence], n: int, backwards: bool) -> list[list[str]]:
    """The `n` words nearest each sentence on one side (before it, or after it `backwards`), in reading order."""
    out: list[list[str]] = [[] for _ in sentences]
    seen: list[str] = []  # the words passed so far in this document, in the order walked, nearest last
    document: tuple[str, int] | None = None
    for i in reversed(range(len(sentences))) if backwards else range(len(sentences)):
        sentence = sentences[i]
        if (sentence.source, sentence.document) != document:
            seen, document = [], (sentence.source, sentence.document)
        out[i] = seen[::-1] if backwards else seen
        seen = (seen + (sentence.tokens[::-1] if backwards else sentence.tokens))[-n:] if n else []
    return out


@dataclass(frozen=True)
class SentenceWindows:
    """Tokenizes a batch of sentences (one tokenizer call) into windows: ids, the word each labelled id stands for
    (`word_labels`), the word each id predicts (`word_index`) and the sentence's number. With `context`, up to that
    many subwords of the neighbouring words (`before`, `after` columns) are read, unlabelled, on each side."""

    tokenizer: Any
    max_length: int
    stride: int
    label_all_subwords: bool
    labelled: bool
    context: int = 0

    def __call__(self, batch: Batch) -> Batch:
        out: Batch = {"input_ids": [], "word_labels": [], "word_index": [], "sentence": []}
        pieces = batch_word_pieces(self.tokenizer, batch["tokens"])
        contexts = self.contexts(batch) if self.context else [([], [])] * len(pieces)
        for number, words, encoded, context in zip(batch["sentence"], batch["tokens"], pieces, contexts, strict=True):
            labels = list(range(len(words))) if self.labelled else None
            for window in sentence_windows(
                self.tokenizer, words, labels, self.max_length, self.stride, self.label_all_subwords, encoded, context
            ):
                out["input_ids"].append(window.input_ids)
                out["word_labels"].append(window.labels)
                out["word_index"].append(window.word_index)
                out["sentence"].append(number)
        return out

    def contexts(self, batch: Batch) -> list[tuple[list[int], list[int]]]:
        """Each sentence's neighbouring subword ids: the last `context` before it, the first `context` after it."""
        before = [_flat(p) for p, _, _ in batch_word_pieces(self.tokenizer, batch["before"])]
        after = [_flat(p) for p, _, _ in batch_word_pieces(self.tokenizer, batch["after"])]
        return [(b[max(len(b) - self.context, 0) :], a[: self.context]) for b, a in zip(before, after, strict=True)]


def _flat(pieces: list[list[int]]) -> list[int]:
    """Words' subword ids as one list."""
    return [piece for word in pieces for piece in word]


@dataclass(frozen=True)
class WindowLabels:
    """A StoreRows hook: a window's labels are its sentence's tag ids at the words it labels (`word_labels`); a
    word's later subwords (labelled only under `label_all_subwords`) take `continuation`'s tag, I-X for B-X."""

    tag_ids: np.ndarray  # every tag of the store's sentences, flat, as ids of the run's vocabulary
    offsets: np.ndarray  # where each sentence's tags start in `tag_ids`
    continuation: np.ndarray  # tag id -> the id a word's later subwords carry

    def __call__(self, row: dict[str, Any], stored: int, position: int) -> None:
        start, labels, previous = self.offsets[row["sentence"]], [], IGNORE_INDEX
        for word in row["word_labels"]:
            tag = IGNORE_INDEX if word == IGNORE_INDEX else int(self.tag_ids[start + word])
            labels.append(int(self.continuation[tag]) if word == previous != IGNORE_INDEX else tag)
            previous = word
        row["labels"] = labels


@dataclass(frozen=True)
class SentenceFields:
    """A StoreRows hook for rows to predict: labels as stored (none), the sentence's record and words."""

    sentences: Dataset

    def __call__(self, row: dict[str, Any], stored: int, position: int) -> None:
        sentence = self.sentences[row["sentence"]]
        row["labels"], row["record"], row["words"] = (
            row["word_labels"],
            json.loads(sentence["fields"]),
            sentence["tokens"],
        )
