"""Streamed sources: Parquet read from any row on, and bad input told in one line naming the file and row."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.data.letter_corpus import OPTIONS
from tetraformer.data import DataError
from tetraformer.data.stream_sources import numbered_pieces, parquet_texts, sample_text, source_format


def parquet(path: Path, texts: list, row_group_size: int = 3, **columns: list) -> Path:
    """A Parquet file with a `text` column (and others)."""
    pq.write_table(pa.table({"text": texts, **columns}), path, row_group_size=row_group_size)
    return path


def test_parquet_rows_from_any_row_on(tmp_path: Path) -> None:
    """Started at row n (in a later row group, or mid-group), the rows are the whole file's from n on."""
    path = parquet(tmp_path / "a.parquet", [f"row {i}" for i in range(10)])
    whole = list(parquet_texts(path, "text"))
    assert whole == [(i, f"row {i}") for i in range(10)]
    assert all(list(parquet_texts(path, "text", n)) == whole[n:] for n in range(12))


def test_pieces_are_numbered_across_the_file(tmp_path: Path) -> None:
    """Plain text, JSONL and Parquet pieces are numbered from 0 in the file, and reading from piece n skips n."""
    texts = ["one", "two two", "three"]
    (tmp_path / "a.txt").write_text("".join(f"{t}\n" for t in texts), encoding="utf-8")
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    parquet(tmp_path / "a.parquet", texts)
    for name in ("a.txt", "a.jsonl", "a.parquet"):
        pieces = list(numbered_pieces(tmp_path / name, OPTIONS, encode=_no_encoding))
        assert pieces == [(i, text, True) for i, text in enumerate(texts)], name
        assert list(numbered_pieces(tmp_path / name, OPTIONS, _no_encoding, 2)) == pieces[2:]
    assert source_format(tmp_path / "x.PARQUET", "auto") == "parquet" and source_format("x.txt", "auto") == "text"


def test_tokenizer_sample_is_the_start_of_the_text(tmp_path: Path) -> None:
    """The text a run tokenizer learns from is the files' first characters, whatever their format."""
    parquet(tmp_path / "a.parquet", ["alpha", "beta"])
    (tmp_path / "b.txt").write_text("gamma\ndelta\n", encoding="utf-8")
    files = [tmp_path / "a.parquet", tmp_path / "b.txt"]
    assert sample_text(files, OPTIONS, 1000) == "alphabetagamma\ndelta\n"
    assert sample_text(files, OPTIONS, 6) == "alphabeta"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"PAR1 not really parquet"), "not a readable Parquet file ("),
        (
            lambda p: pq.write_table(pa.table({"id": [1], "body": ["x"]}), p),
            "missing column 'text' (columns present: 'id', 'body'); set --data.text_field",
        ),
        (lambda p: pq.write_table(pa.table({"text": [1, 2]}), p), "column 'text' holds int64, not text"),
        (lambda p: parquet(p, ["a", "b", "c", "d", None]), "row 5: column 'text' is null"),
        (lambda p: pq.write_table(pa.table({"text": pa.array([], pa.string())}), p), "Parquet file has no rows"),
    ],
    ids=["corrupt", "missing-column", "not-text", "null", "no-rows"],
)
def test_bad_parquet_is_one_line_naming_the_file(tmp_path: Path, make: Callable[[Path], Any], message: str) -> None:
    """A corrupt file, a missing column (listing those there are), a column of numbers, a null text, no rows."""
    path = tmp_path / "bad.parquet"
    make(path)
    with pytest.raises(DataError) as caught:
        list(numbered_pieces(path, OPTIONS, _no_encoding))
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_a_damaged_row_group_names_the_rows(tmp_path: Path) -> None:
    """Bytes damaged inside the file (not its footer) stop the stream with the file and the rows being read."""
    path = parquet(tmp_path / "a.parquet", [f"text number {i}" * 20 for i in range(30)], row_group_size=10)
    data = bytearray(path.read_bytes())
    data[4:400] = b"\xff" * 396
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"a\.parquet: cannot read rows from row 1 on \("):
        list(parquet_texts(path, "text"))


def _no_encoding(texts: list[str]) -> list[list[int]]:
    raise AssertionError("no tokenizer call is needed to read one-piece documents")
