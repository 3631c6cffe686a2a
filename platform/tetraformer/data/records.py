"""Validating readers for tabular records: JSONL, JSON arrays, CSV and TSV, with file:line errors."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tetraformer.data.dataset import build_dataset
from tetraformer.data.errors import DataError, check_choice
from tetraformer.data.files import FileSpec, resolve_files
from tetraformer.data.hf_sources import check_columns, is_table_file, iter_table_rows
from tetraformer.data.lines import iter_lines

if TYPE_CHECKING:
    from datasets import Dataset

RecordFormat = Literal["jsonl", "json", "csv", "tsv"]

SUFFIX_FORMATS: dict[str, RecordFormat] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
}
SOURCE_COLUMN, LINE_COLUMN = "_source", "_line"

_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_WHITESPACE = re.compile(r"\s*")


@dataclass(frozen=True)
class Record:
    """One row of a data file: its fields and where it came from."""

    data: dict[str, Any]
    source: str
    line: int

    def error(self, message: str) -> DataError:
        """A DataError located at this record, e.g. `record.error("unknown label 'x'")`."""
        return DataError(message, self.source, self.line)


def json_type(value: Any) -> str:
    """The JSON name of a Python value's type (object, array, string, number, boolean, null)."""
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def infer_format(path: str | Path) -> RecordFormat:
    """The record format implied by a file's suffix; a DataError for unknown suffixes."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIX_FORMATS:
        known = ", ".join(SUFFIX_FORMATS)
        raise DataError(f"cannot tell the format from suffix {suffix!r} (known: {known}); pass format=", path)
    return SUFFIX_FORMATS[suffix]


def iter_records(
    path: str | Path,
    format: RecordFormat | None = None,  # noqa: A002 - the natural name, as in `datasets.load_dataset`
    required_fields: Sequence[str] = (),
    encoding: str = "utf-8",
) -> Iterator[Record]:
    """Yield validated records from one file; every record has the required fields.

    A Parquet or Arrow file is read as a table whatever `format` says: a row's index (0-based) is its line.
    """
    if is_table_file(path):
        yield from _table_records(path, required_fields)
        return
    fmt = format or infer_format(path)
    check_choice("record format", fmt, RecordFormat)
    if fmt in ("csv", "tsv"):
        rows = _delimited_records(path, fmt, required_fields, encoding)
    else:
        rows = _json_records(path, fmt, encoding)
    empty = True
    for record in rows:
        _check_fields(record, required_fields)
        empty = False
        yield record
    if empty:
        raise DataError("file has no records", path)


def read_records(
    files: FileSpec,
    format: RecordFormat | None = None,  # noqa: A002
    required_fields: Sequence[str] = (),
    encoding: str = "utf-8",
    cache_dir: str | Path | None = None,
) -> Dataset:
    """Read records from files into a Dataset: the fields (only the required ones when given) + _source, _line."""
    if format is not None:
        check_choice("record format", format, RecordFormat)
    paths = [str(p) for p in resolve_files(files)]
    options = {"fmt": format, "required_fields": tuple(required_fields), "encoding": encoding}
    return build_dataset(_generate_rows, paths, options, cache_dir=cache_dir)


def _generate_rows(
    paths: list[str], fmt: RecordFormat | None, required_fields: tuple[str, ...], encoding: str
) -> Iterator[dict[str, Any]]:
    """Rows for the Dataset builder, validated as they are read; all rows share one schema."""
    schema = _Schema(required_fields)
    for path in paths:
        for record in iter_records(path, fmt, required_fields, encoding):
            yield {**schema.check(record), SOURCE_COLUMN: record.source, LINE_COLUMN: record.line}


class _Schema:
    """The columns and JSON value types that every record must share to fit in one Dataset."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = list(columns)  # the caller's choice; extra fields are then dropped
        self.chosen = bool(columns)
        self.types: dict[str, tuple[str, Record]] = {}
        self.first: Record | None = None

    def check(self, record: Record) -> dict[str, Any]:
        """The record's values for the schema's columns; a DataError if its keys or types disagree."""
        if self.first is None:
            self.first = record
            self.columns = self.columns if self.chosen else list(record.data)
        elif not self.chosen and set(record.data) != set(self.columns):
            raise record.error(
                f"fields {_quote(record.data)} differ from {_quote(self.columns)} of the first record "
                f"({self.first.source}:{self.first.line}); pass required_fields to pick columns"
            )
        row = {name: record.data[name] for name in self.columns}
        for name, value in row.items():
            self._check_type(record, name, value)
        return row

    def _check_type(self, record: Record, name: str, value: Any) -> None:
        """Every non-null value of a column must have the same JSON type."""
        if value is None:
            return
        kind = json_type(value)
        seen_kind, seen_at = self.types.setdefault(name, (kind, record))
        if seen_kind != kind:
            where = f"{seen_at.source}:{seen_at.line}"
            raise record.error(f"field {name!r} is a {kind} here but a {seen_kind} at {where}")


def _table_records(path: str | Path, required: Sequence[str]) -> Iterator[Record]:
    """Records of a Parquet/Arrow file (ClassLabel ids as names); a missing column names the ones there are."""
    check_columns(path, required)
    empty = True
    for index, row in iter_table_rows(path):
        empty = False
        yield Record(row, str(path), index)
    if empty:
        raise DataError("table has no rows", path)


def _check_fields(record: Record, required: Iterable[str]) -> None:
    """Raise at the record if any required field is missing, listing the keys it has."""
    missing = [name for name in required if name not in record.data]
    if missing:
        present = ", ".join(repr(k) for k in record.data) or "none"
        raise record.error(f"missing field {_quote(missing)} (keys present: {present})")


def _quote(names: Iterable[str]) -> str:
    """Names as a comma-separated list of quoted strings."""
    return ", ".join(repr(name) for name in names)


def _json_records(path: str | Path, fmt: RecordFormat, encoding: str) -> Iterator[Record]:
    """Records from JSON lines, or from a top-level JSON array (a .json file starting with '[')."""
    lines = iter_lines(path, encoding)
    for number, line in lines:
        if not line.strip():
            continue
        if fmt == "json" and line.lstrip().startswith("["):
            rest = "".join(text for _, text in lines)
            yield from _json_array_records(path, "\n" * (number - 1) + line + rest)
            return
        yield _json_line_record(path, number, line)


def _json_line_record(path: str | Path, number: int, line: str) -> Record:
    """Parse one JSON line into a Record; an error names its column on this line."""
    text = line.rstrip()  # with its line ending, json places an error at the end on a next line's column 1
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        cut = (
            " (the line ends there: a JSON lines file holds one whole object per line)" if err.pos == len(text) else ""
        )
        raise DataError(f"line is not valid JSON: {_json_reason(err)}{cut}", path, number) from None
    return _as_record(value, path, number)


def _json_array_records(path: str | Path, text: str) -> Iterator[Record]:
    """Records from a JSON array, each located at the line where it starts."""
    decoder = json.JSONDecoder()
    pos = _WHITESPACE.match(text, text.index("[") + 1).end()
    line, counted = 1, 0
    while not text.startswith("]", pos):
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise DataError(f"not valid JSON: {_json_reason(err)}", path, err.lineno) from None
        line, counted = line + text.count("\n", counted, pos), pos
        yield _as_record(value, path, line)
        pos = _WHITESPACE.match(text, end).end()
        if text.startswith(",", pos):
            pos = _WHITESPACE.match(text, pos + 1).end()
        elif not text.startswith("]", pos):
            raise DataError("expected ',' or ']' after an array element", path, text.count("\n", 0, pos) + 1)
    if text[pos + 1 :].strip():
        raise DataError("extra data after the JSON array", path, text.count("\n", 0, pos) + 1)


def _json_reason(err: json.JSONDecodeError) -> str:
    """json's reason with the column it names (its message alone stops at "Expecting value")."""
    return f"{err.msg[:1].lower()}{err.msg[1:]} at column {err.colno}"


def _as_record(value: Any, path: str | Path, line: int) -> Record:
    """Wrap a parsed JSON value as a Record; it must be an object."""
    if not isinstance(value, dict):
        raise DataError(f"expected a JSON object, got {json_type(value)}", path, line)
    return Record(value, str(path), line)


def _delimited_records(path: str | Path, fmt: RecordFormat, required: Sequence[str], encoding: str) -> Iterator[Record]:
    """Records from CSV (quoted fields allowed) or TSV (no quoting: quotes are literal text)."""
    dialect = {"delimiter": ","} if fmt == "csv" else {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
    reader = csv.reader((line for _, line in iter_lines(path, encoding)), **dialect)
    header = _read_header(reader, path, required)
    previous = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise DataError(f"malformed {fmt.upper()} row ({err})", path, previous + 1) from None
        start, previous = previous + 1, reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise DataError(f"row has {len(row)} fields but the header has {len(header)}", path, start)
        yield Record(dict(zip(header, row, strict=True)), str(path), start)


def _read_header(reader: Iterator[list[str]], path: str | Path, required: Sequence[str]) -> list[str]:
    """The header row; it must name every required column, each once."""
    header = [name.strip() for name in next(reader, [])]
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise DataError(f"header repeats column {_quote(duplicates)}", path, 1)
    missing = [name for name in required if name not in header]
    if missing:
        raise DataError(f"header is missing column {_quote(missing)} (columns found: {_quote(header)})", path, 1)
    return header
