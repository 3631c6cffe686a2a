"""Tests for the word-vectors reader: word2vec/GloVe text and the vectors.npy + words.tsv directory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tetraformer.data.errors import DataError
from tetraformer.data.word_vectors import read_word_vectors, write_word_vectors


def test_text_with_header_first_line_of_a_word_wins(tmp_path: Path) -> None:
    """A `COUNT DIMS` header is skipped, each word maps to its row, a repeated word keeps its first vector."""
    path = tmp_path / "vec.txt"
    path.write_text("3 2\nthe 0.5 -1\ncat 2 3e-1\nthe 9 9\n", encoding="utf-8")
    vectors = read_word_vectors(path)
    assert vectors.dims == 2
    np.testing.assert_allclose(vectors.table[vectors.rows["the"]], [0.5, -1.0])
    np.testing.assert_allclose(vectors.table[vectors.rows["cat"]], [2.0, 0.3])
    assert len(vectors.rows) == 2


def test_text_without_header_and_trailing_spaces(tmp_path: Path) -> None:
    """GloVe's files have no header; trailing spaces, CRLF endings, blank lines and words with spaces are fine."""
    path = tmp_path / "glove.txt"
    path.write_bytes(b"a 1 2 3 \r\n\r\nb 4 5 6\r\n. . . 7 8 9\n")
    vectors = read_word_vectors(path)
    assert vectors.table.shape == (3, 3)
    assert vectors.vector_rows(["b", "zzz", "a", ""]) == ([0, 2], [1, 0])
    np.testing.assert_array_equal(vectors.table[vectors.rows[". . ."]], [7, 8, 9])


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a 1 2\nb 1\n", 2, "expected a word and 2 numbers, found 2 fields"),
        ("a 1 2\nb 1 x\n", 2, "'b' holds something that is not a number"),
        ("a 1 2\nb c 1 x\n", 2, "'b c' holds something that is not a number"),
        ("lonely\n", 1, "expected a word and its numbers, found one field"),
    ],
)
def test_bad_text_line_is_named(tmp_path: Path, text: str, line: int, message: str) -> None:
    """A line with the wrong count or a non-number is a DataError naming the file and line."""
    path = tmp_path / "bad.vec"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message) as err:
        read_word_vectors(path)
    assert err.value.path == str(path) and err.value.line == line


def test_directory_round_trip_with_shared_rows(tmp_path: Path) -> None:
    """`write_word_vectors` then `read_word_vectors`: words sharing a row read the same vector."""
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    write_word_vectors(tmp_path / "v", table, {"東京": 0, "大阪": 1, "おおさか": 1, "名古屋": 2})
    vectors = read_word_vectors(tmp_path / "v")
    np.testing.assert_array_equal(vectors.table, table)
    assert vectors.rows == {"東京": 0, "大阪": 1, "おおさか": 1, "名古屋": 2}


def test_directory_errors(tmp_path: Path) -> None:
    """A missing file, a row outside the table, an empty source and a word with a tab are refused clearly."""
    with pytest.raises(DataError, match="no such word-vectors file"):
        read_word_vectors(tmp_path / "nothing")
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "vectors.npy", np.zeros((2, 3), np.float32))
    with pytest.raises(DataError, match="words.tsv is missing"):
        read_word_vectors(tmp_path / "d")
    (tmp_path / "d" / "words.tsv").write_text("a\t0\nb\t5\n", encoding="utf-8")
    with pytest.raises(DataError, match="a row below 2") as err:
        read_word_vectors(tmp_path / "d")
    assert err.value.line == 2
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="holds no word vectors"):
        read_word_vectors(tmp_path / "empty.txt")
    with pytest.raises(ValueError, match="cannot be empty or hold a tab"):
        write_word_vectors(tmp_path / "w", np.zeros((1, 2)), {"a\tb": 0})
