"""Documents -> sentences -> BERT training rows: `[CLS] A [SEP]` blocks, or `[CLS] A [SEP] B [SEP]` NSP pairs.

As in BERT's create_pretraining_data: a document's sentences are packed greedily into chunks that fill the
row; a row never mixes documents. For next-sentence prediction each chunk is cut in two at a sentence
boundary (inside its only sentence when it has one); half of the pairs keep the real continuation
(label 0), the other half take B from a random other document (label 1).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tetraformer.data.masking import word_starts

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")  # after sentence-final punctuation and whitespace
IS_NEXT, IS_RANDOM = 0, 1  # Hugging Face's next_sentence_label convention


@dataclass
class Piece:
    """Token ids of a span of text and, per token, whether it starts a word."""

    ids: list[int] = field(default_factory=list)
    starts: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def __add__(self, other: Piece) -> Piece:
        return Piece(self.ids + other.ids, self.starts + other.starts)

    def cut(self, start: int, stop: int | None = None) -> Piece:
        """The tokens [start, stop)."""
        return Piece(self.ids[start:stop], self.starts[start:stop])


Document = list[Piece]  # its sentences, none longer than a row holds


def split_sentences(text: str) -> list[str]:
    """A document's sentences: its lines, each cut after sentence-final punctuation; blanks dropped."""
    return [s for line in text.splitlines() for s in SENTENCE_END.split(line.strip()) if s]


def tokenize_documents(texts: Iterable[str], tokenizer: Any, max_tokens: int, batch_size: int = 1000) -> list[Document]:
    """Tokenize each document's sentences (no special tokens); sentences over max_tokens are cut in pieces."""
    documents: list[Document] = []
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            documents += tokenize_batch(batch, tokenizer, max_tokens)
            batch = []
    if batch:
        documents += tokenize_batch(batch, tokenizer, max_tokens)
    return [doc for doc in documents if doc]


@dataclass(frozen=True)
class DocumentPieces:
    """Tokenizes a batch of documents (`tokenize_batch`) into columns a row store keeps: each document's
    sentence pieces' ids and word starts."""

    tokenizer: Any
    max_tokens: int

    def __call__(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        documents = tokenize_batch(batch["text"], self.tokenizer, self.max_tokens)
        return {
            "ids": [[piece.ids for piece in doc] for doc in documents],
            "starts": [[piece.starts for piece in doc] for doc in documents],
        }


def stored_documents(table: Iterable[dict[str, Any]]) -> list[Document]:
    """The documents DocumentPieces stored (those with text), as pieces again."""
    documents = ([Piece(ids, starts) for ids, starts in zip(d["ids"], d["starts"], strict=True)] for d in table)
    return [doc for doc in documents if doc]


def tokenize_batch(texts: list[str], tokenizer: Any, max_tokens: int) -> list[Document]:
    """Documents of a batch of texts, all their sentences encoded in one tokenizer call."""
    sentences = [split_sentences(text) for text in texts]
    flat = [s for doc in sentences for s in doc]
    encoded = tokenizer(flat, add_special_tokens=False) if flat else None
    documents, i = [], 0
    for doc in sentences:
        pieces: Document = []
        for _ in doc:
            ids = encoded["input_ids"][i]
            starts = word_starts(encoded.word_ids(i)) if tokenizer.is_fast else [True] * len(ids)
            whole = Piece(list(ids), starts)
            pieces += [whole.cut(k, k + max_tokens) for k in range(0, len(whole), max_tokens)]
            i += 1
        documents.append(pieces)
    return documents


def chunks(document: Document, max_tokens: int) -> Iterator[list[Piece]]:
    """Consecutive sentences, packed greedily into groups of at most max_tokens tokens."""
    group: list[Piece] = []
    size = 0
    for sentence in document:
        if group and size + len(sentence) > max_tokens:
            yield group
            group, size = [], 0
        group.append(sentence)
        size += len(sentence)
    if group:
        yield group


def join(pieces: list[Piece]) -> Piece:
    """One piece of consecutive pieces."""
    return sum(pieces, Piece())


def single_rows(documents: list[Document], cls_id: int, sep_id: int, max_length: int) -> list[dict]:
    """`[CLS] chunk [SEP]` rows of every document, each at most max_length tokens."""
    rows = []
    for doc in documents:
        for group in chunks(doc, max_length - 2):
            rows.append(_row([join(group)], cls_id, sep_id))
    return rows


def pair_rows(documents: list[Document], cls_id: int, sep_id: int, max_length: int, rng: random.Random) -> list[dict]:
    """`[CLS] A [SEP] B [SEP]` rows with segment ids and a next_sentence_label, 50% real next, 50% random."""
    rows = []
    budget = max_length - 3
    for index, doc in enumerate(documents):
        for group in chunks(doc, budget):
            if sum(len(s) for s in group) < 2:
                continue  # one token cannot be cut into A and B
            first, second = _cut(group, rng)
            label = IS_RANDOM if rng.random() < 0.5 else IS_NEXT
            if label == IS_RANDOM:
                second = _random_segment(documents, index, budget - len(first), rng)
            rows.append({**_row([first, second], cls_id, sep_id), "next_sentence_label": label})
    return rows


def _cut(group: list[Piece], rng: random.Random) -> tuple[Piece, Piece]:
    """A and its real continuation B: cut at a random sentence boundary, or inside a lone sentence."""
    if len(group) > 1:
        k = rng.randint(1, len(group) - 1)
        return join(group[:k]), join(group[k:])
    sentence = group[0]
    k = rng.randint(1, len(sentence) - 1)
    return sentence.cut(0, k), sentence.cut(k)


def _random_segment(documents: list[Document], index: int, budget: int, rng: random.Random) -> Piece:
    """Up to `budget` tokens of consecutive sentences from a random other document (any one if it is alone)."""
    others = len(documents) - 1
    pick = rng.randrange(others) if others else 0
    doc = documents[pick + (pick >= index) if others else index]
    start = rng.randrange(len(doc))
    segment = Piece()
    for sentence in doc[start:]:
        if len(segment) + len(sentence) > budget:
            break
        segment = segment + sentence
    return segment if len(segment) else doc[start].cut(0, budget)


def _row(segments: list[Piece], cls_id: int, sep_id: int) -> dict:
    """Input ids, segment ids and word starts of `[CLS] s1 [SEP] (s2 [SEP])`."""
    ids, types, starts = [cls_id], [0], [False]
    for segment_id, segment in enumerate(segments):
        ids += [*segment.ids, sep_id]
        types += [segment_id] * (len(segment) + 1)
        starts += [*segment.starts, False]
    row = {"input_ids": ids, "word_starts": starts}
    if len(segments) > 1:
        row["token_type_ids"] = types
    return row
