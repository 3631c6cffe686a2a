"""Streaming tokenization: a long document cut into pieces encodes to the ids of the whole document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tetraformer.data import DataError, train_tokenizer
from tetraformer.data.token_stream import batch_encoder, batches, file_pieces

# blank lines, runs of them, indented and space-ended lines, tabs, CRLF, digits, punctuation and non-ASCII
LINES = [
    "Chapter 1\n",
    "\n",
    "It was a bright cold day in April, and the clocks were striking thirteen.\n",
    "  Winston Smith, his chin nuzzled into his breast,\n",
    "slipped quickly through the glass doors   \n",
    "\n",
    "\n",
    "\tof Victory Mansions, 1984 — though not quickly enough.\r\n",
    'Ünïcödé façade: naïve café, 42nd street; "quoted" (parens) [brackets]!\n',
    " a line that starts with a space\n",
    "done.",
]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A multi-line text, its lines shuffled into many arrangements."""
    path = tmp_path_factory.mktemp("text") / "book.txt"
    body = [LINES[(i * 7 + i // 11) % (len(LINES) - 1)] for i in range(400)]
    path.write_bytes("".join([*body, LINES[-1]]).encode("utf-8"))
    return path


@pytest.mark.parametrize("kind", ["bpe", "wordpiece", "unigram", "char"])
def test_pieces_encode_to_the_whole_files_ids(kind: str, text_file: Path, tmp_path: Path) -> None:
    tokenizer = train_tokenizer(text_file, kind, 400 if kind != "char" else 120, tmp_path / kind)
    encode = batch_encoder(tokenizer)
    pieces = list(file_pieces(text_file, "utf-8", encode, chunk_chars=40))
    whole = text_file.read_text(encoding="utf-8").replace("\r\n", "\n")
    assert "".join(text for text, _ in pieces) == whole
    assert [ends for _, ends in pieces] == [False] * (len(pieces) - 1) + [True]
    assert [i for piece in encode([text for text, _ in pieces]) for i in piece] == encode([whole])[0]
    if kind != "unigram":  # Metaspace joins a line to the next unless it starts with a space: few safe cuts
        assert len(pieces) > 20


def test_a_blank_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "blank.txt"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DataError, match="blank.txt: file has no text"):
        list(file_pieces(path, "utf-8", _no_encoder))


def test_batches_are_bounded_in_texts_and_characters() -> None:
    pieces = [("x" * 10, True)] * 25
    assert [len(b) for b in batches(pieces, max_chars=1000, max_texts=10)] == [10, 10, 5]
    assert [len(b) for b in batches(pieces, max_chars=35, max_texts=100)] == [4] * 6 + [1]


def _no_encoder(texts: list[str]) -> Any:
    raise AssertionError("no encoding needed")
