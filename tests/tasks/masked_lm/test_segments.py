"""Documents -> rows: `[CLS] A [SEP]` blocks within a document, NSP pairs 50/50 with correct segment ids."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tasks.masked_lm.segments import (
    IS_NEXT,
    IS_RANDOM,
    Piece,
    pair_rows,
    single_rows,
    split_sentences,
    tokenize_documents,
)
from tests.tasks.masked_lm.conftest import topic_corpus
from tetraformer.data import train_tokenizer

CLS, SEP = 2, 3


def numbered_documents(n_documents: int, seed: int = 0) -> list[list[Piece]]:
    """Documents whose token ids encode (document, sentence, position): 1000*d + 10*s + k, plus 100000."""
    rng = random.Random(seed)
    documents = []
    for d in range(n_documents):
        lengths = [rng.randint(3, 8) for _ in range(rng.randint(1, 6))]
        documents.append(
            [Piece([100000 + 1000 * d + 10 * s + k for k in range(n)], [True] * n) for s, n in enumerate(lengths)]
        )
    return documents


def document_of(token: int) -> int:
    """The document a numbered token came from."""
    return (token - 100000) // 1000


def test_split_sentences() -> None:
    """Lines, then sentence-final punctuation followed by space, end sentences; blanks are dropped."""
    text = "One. Two? Three!\n\n  Four 3.5 five.\nSix"
    assert split_sentences(text) == ["One.", "Two?", "Three!", "Four 3.5 five.", "Six"]


def test_single_rows_fill_up_to_max_length_within_a_document() -> None:
    """Each row is [CLS] consecutive sentences [SEP], at most max_length long, from one document, in order."""
    documents = numbered_documents(50)
    rows = single_rows(documents, CLS, SEP, max_length=20)
    assert sum(len(r["input_ids"]) - 2 for r in rows) == sum(len(s) for d in documents for s in d)
    for row in rows:
        ids = row["input_ids"]
        assert ids[0] == CLS and ids[-1] == SEP and len(ids) <= 20
        body = ids[1:-1]
        assert len({document_of(t) for t in body}) == 1 and body == sorted(body)
        assert len(row["word_starts"]) == len(ids) and "token_type_ids" not in row


def test_pairs_are_half_real_next_half_random_with_segment_ids() -> None:
    """~50/50 labels; segment 0 is [CLS] A [SEP], segment 1 is B [SEP]; real B continues A, random B does not."""
    documents = numbered_documents(400)
    rows = pair_rows(documents, CLS, SEP, max_length=24, rng=random.Random(1))
    labels = [r["next_sentence_label"] for r in rows]
    assert labels.count(IS_RANDOM) / len(labels) == pytest.approx(0.5, abs=0.05)
    for row in rows:
        ids, types = row["input_ids"], row["token_type_ids"]
        assert len(ids) == len(types) == len(row["word_starts"]) <= 24
        first_sep = ids.index(SEP)
        assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        a, b = ids[1:first_sep], ids[first_sep + 1 : -1]
        assert a and b
        if row["next_sentence_label"] == IS_NEXT:
            assert a + b == sorted(a + b) and document_of(a[0]) == document_of(b[-1])
            assert b[0] > a[-1]
        else:
            assert document_of(a[0]) != document_of(b[0])


def test_tokenize_documents_cuts_long_sentences_and_keeps_word_starts(tmp_path: Path) -> None:
    """Sentences longer than a row are cut into pieces; every piece keeps its tokens' word-start flags."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(topic_corpus(20), encoding="utf-8")
    tokenizer = train_tokenizer([corpus], "wordpiece", 100, tmp_path / "tokenizer")
    documents = tokenize_documents(["one one one one one one one .\nzero two", "  "], tokenizer, max_tokens=3)
    assert len(documents) == 1  # the blank document is dropped
    lengths = [len(p) for p in documents[0]]
    assert lengths == [3, 3, 2, 2]  # 8 tokens cut 3 + 3 + 2, then "zero two"
    assert all(len(p.ids) == len(p.starts) for p in documents[0])
