"""Words to subword windows for per-word tasks (tagging), and subword predictions back to one per word.

A sentence's words are encoded with the run's tokenizer (each word on its own, `is_split_into_words`), then
cut into windows of at most `max_length` ids (the tokenizer's specials included) that overlap by up to
`stride` subwords; nothing is truncated. Every word is *owned* by exactly one window, the one where it has
the most context on its poorer side, and only there does its first subword give the word's prediction
(`word_index`). Labels sit on owned words' first subwords (or all their subwords with `label_all_subwords`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import Sampler

from tetraformer.data.buckets import LengthBuckets
from tetraformer.data.collate import IGNORE_INDEX

log = logging.getLogger(__name__)
Pieces = tuple[list[list[int]], list[int], list[int]]  # each word's subword ids, the specials before, after


@dataclass
class Window:
    """One model input: ids with the tokenizer's specials, and per id the word it predicts and its label."""

    input_ids: list[int]
    word_index: list[int]  # the sentence word this id predicts (first subword of an owned word), else -100
    labels: list[int]  # the training label of this id, else -100


def word_pieces(tokenizer: Any, words: list[str]) -> Pieces:
    """(subword ids of each word, the specials before the words, the specials after them).

    A word the tokenizer turns into nothing (e.g. a control character) gets the unknown token, so every
    word has a first subword to be predicted from.
    """
    return batch_word_pieces(tokenizer, [words])[0]


def batch_word_pieces(tokenizer: Any, sentences: list[list[str]]) -> list[Pieces]:
    """`word_pieces` of each sentence, all encoded in one tokenizer call (a fast tokenizer's batch)."""
    encoding = tokenizer(sentences, is_split_into_words=True, add_special_tokens=True)
    unk = tokenizer.unk_token_id if tokenizer.unk_token_id is not None else tokenizer.pad_token_id
    return [
        _pieces(encoding["input_ids"][i], encoding.word_ids(i), len(words), unk) for i, words in enumerate(sentences)
    ]


def _pieces(ids: list[int], owners: list[int | None], n_words: int, unk: int) -> Pieces:
    """Split one sentence's ids into each word's subwords and the specials around them."""
    pieces: list[list[int]] = [[] for _ in range(n_words)]
    for token, owner in zip(ids, owners, strict=True):
        if owner is not None:
            pieces[owner].append(token)
    real = [i for i, owner in enumerate(owners) if owner is not None]
    prefix = ids[: real[0]] if real else ids[: len(ids) // 2]
    suffix = ids[real[-1] + 1 :] if real else ids[len(ids) // 2 :]
    return [p or [unk] for p in pieces], prefix, suffix


def window_spans(lengths: list[int], budget: int, stride: int) -> list[tuple[int, int]]:
    """[start, end) word spans of at most `budget` subwords, consecutive spans sharing up to `stride` subwords.

    A single word longer than the budget is a span of its own (its ids are cut to the budget later).
    """
    if budget < 1:
        raise ValueError(f"windows need room for at least one subword, got {budget}")
    ends = [0, *accumulate(lengths)]  # ends[i]: subwords before word i
    spans, start, n = [], 0, len(lengths)
    while start < n:
        end = start + 1
        while end < n and ends[end + 1] - ends[start] <= budget:
            end += 1
        spans.append((start, end))
        if end == n:
            break
        nxt = end
        while nxt - 1 > start and ends[end] - ends[nxt - 1] <= stride:
            nxt -= 1
        start = nxt
    return spans


def owners(lengths: list[int], spans: list[tuple[int, int]]) -> list[int]:
    """For each word, the span where it has the most context: max of min(subwords left, subwords right)."""
    ends = [0, *accumulate(lengths)]
    best: list[tuple[int, int]] = [(-1, -1)] * len(lengths)  # (score, span index)
    for index, (start, end) in enumerate(spans):
        for word in range(start, end):
            score = min(ends[word] - ends[start], ends[end] - ends[word + 1])
            if score > best[word][0]:
                best[word] = (score, index)
    return [span for _, span in best]


def fit_context(before: list[int], after: list[int], room: int) -> tuple[list[int], list[int]]:
    """The end of `before` and the start of `after` that fit `room` ids: half the room each, a side's unused share
    to the other."""
    room = max(room, 0)
    n_after = min(len(after), max(room // 2, room - len(before)))
    n_before = min(len(before), room - n_after)
    return before[len(before) - n_before :], after[:n_after]


def sentence_windows(
    tokenizer: Any,
    words: list[str],
    label_ids: list[int] | None,
    max_length: int,
    stride: int,
    label_all_subwords: bool = False,
    encoded: Pieces | None = None,
    context: tuple[list[int], list[int]] = ([], []),
) -> list[Window]:
    """The windows that cover one sentence, each word predicted in exactly one of them (`encoded`: the sentence's
    `word_pieces`, when a batch call encoded them already). `context`: subword ids of the text before and after
    the sentence, read unlabelled around a sentence that fits one window, as much as its room holds."""
    pieces, prefix, suffix = encoded or word_pieces(tokenizer, words)
    budget = max_length - len(prefix) - len(suffix)
    lengths = [len(p) for p in pieces]
    spans = window_spans(lengths, budget, stride)
    if len(spans) == 1 and (context[0] or context[1]):
        before, after = fit_context(*context, budget - sum(lengths))
        prefix, suffix = [*prefix, *before], [*after, *suffix]
    owner = owners(lengths, spans)
    if any(n > budget for n in lengths):
        log.warning(
            "a word of %d subwords is longer than max_length allows: only its first %d are read", max(lengths), budget
        )
    windows = []
    for index, (start, end) in enumerate(spans):
        ids, word_index, labels = list(prefix), [IGNORE_INDEX] * len(prefix), [IGNORE_INDEX] * len(prefix)
        for word in range(start, end):
            piece = pieces[word][:budget]
            owned = owner[word] == index
            label = label_ids[word] if label_ids is not None and owned else IGNORE_INDEX
            ids += piece
            word_index += [word if owned else IGNORE_INDEX] + [IGNORE_INDEX] * (len(piece) - 1)
            labels += [label] + [label if label_all_subwords else IGNORE_INDEX] * (len(piece) - 1)
        tail = [IGNORE_INDEX] * len(suffix)
        windows.append(Window(ids + list(suffix), word_index + tail, labels + tail))
    return windows


def gather_words(values: Tensor, word_index: Tensor, sentence: Tensor, fill: float = IGNORE_INDEX) -> Tensor:
    """Per-subword values of a batch of windows -> one value per word of each sentence.

    values (B, T, ...) and word_index (B, T) (-100 where an id predicts no word) of windows, sentence (B,)
    the batch-local sentence of each window (0..S-1) -> (S, W, ...), W the most words of a sentence, `fill`
    where a sentence has no word W.
    """
    keep = word_index >= 0  # (B, T)
    rows = sentence[:, None].expand_as(word_index)  # (B, T)
    n_sentences = int(sentence.max()) + 1 if sentence.numel() else 0
    n_words = int(word_index.max()) + 1 if keep.any() else 0
    out = values.new_full((n_sentences, n_words, *values.shape[2:]), fill)  # (S, W, ...)
    out[rows[keep], word_index[keep]] = values[keep]
    return out


def word_mask(word_index: Tensor, sentence: Tensor) -> Tensor:
    """(S, W) True at the words the windows predict: a prefix of each sentence row."""
    ones = torch.ones_like(word_index, dtype=torch.bool)  # (B, T)
    return gather_words(ones, word_index, sentence, fill=False)


class SentenceBatches(Sampler[list[int]]):
    """Batches of whole sentences: the rows (windows) of `batch_size` sentences, never a sentence split.

    Rows are grouped by `sentence_of` (each row's sentence). Sentences come in order, shuffled (a new order
    per epoch from `seed`), or with `lengths` shuffled in buckets of similar length (LengthBuckets).
    """

    def __init__(
        self,
        sentence_of: list[int],
        batch_size: int,
        shuffle: bool = False,
        lengths: list[int] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        groups: dict[int, list[int]] = {}
        for row, sentence in enumerate(sentence_of):
            groups.setdefault(sentence, []).append(row)
        self.groups = list(groups.values())
        self.batch_size, self.shuffle, self.seed, self.epoch = batch_size, shuffle, seed, 0
        self.buckets = None
        if lengths is not None:
            longest = [max(lengths[row] for row in group) for group in self.groups]
            self.buckets = LengthBuckets(longest, batch_size, seed)

    def set_epoch(self, epoch: int) -> None:
        """Use the order of this epoch."""
        self.epoch = epoch
        if self.buckets is not None:
            self.buckets.set_epoch(epoch)

    def __len__(self) -> int:
        return -(-len(self.groups) // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        for sentences in self._sentence_batches():
            yield [row for sentence in sentences for row in self.groups[sentence]]

    def _sentence_batches(self) -> Iterator[list[int]]:
        """Lists of sentence numbers, one per batch."""
        if self.buckets is not None:
            yield from self.buckets
            return
        order = list(range(len(self.groups)))
        if self.shuffle:
            order = torch.randperm(len(order), generator=torch.Generator().manual_seed(self.seed + self.epoch)).tolist()
        for start in range(0, len(order), self.batch_size):
            yield order[start : start + self.batch_size]
