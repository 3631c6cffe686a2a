"""Reading (source, target) pairs: record files (JSONL/JSON/CSV/TSV) or two parallel plain-text files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tetraformer.data import DataError, iter_lines, read_records, resolve_files
from tetraformer.data.records import LINE_COLUMN, SOURCE_COLUMN, RecordFormat

Where = tuple[str, int]  # (file, line) of a pair, for errors


@dataclass
class Pair:
    """One example: the source text (prefix included), its target (None when predicting) and the input record."""

    source: str
    target: str | None
    where: Where
    record: dict[str, Any]


@dataclass
class PairFile:
    """One file of a mixture: its path and the task prefix put before each of its sources."""

    path: str
    source_prefix: str = ""


def read_pairs(
    path: str,
    format: RecordFormat | None,  # noqa: A002 - the natural name, as in `datasets.load_dataset`
    fields: tuple[str, str],
    prefix: str,
    encoding: str,
    with_target: bool = True,
) -> list[Pair]:
    """Pairs from record files: non-empty source and target fields; other fields kept in `record`."""
    source_field, target_field = fields
    required = fields if with_target else (source_field,)
    records = read_records(path, format, required if with_target else (), encoding)
    pairs = []
    for row in records:
        where = (row[SOURCE_COLUMN], row[LINE_COLUMN])
        record = {k: v for k, v in row.items() if k not in (SOURCE_COLUMN, LINE_COLUMN)}
        source = _text(record, source_field, where)
        target = _text(record, target_field, where) if with_target else None
        pairs.append(Pair(prefix + source, target, where, record))
    return pairs


def read_parallel(source_path: str, target_path: str, prefix: str, encoding: str) -> list[Pair]:
    """Pairs from two plain-text files read line by line; both must have the same number of lines."""
    sources = _lines(source_path, encoding)
    targets = _lines(target_path, encoding)
    if len(sources) != len(targets):
        raise DataError(
            f"parallel files differ in length: {source_path} has {len(sources)} lines, {target_path} has {len(targets)}"
        )
    pairs = []
    for (number, source), (_, target) in zip(sources, targets, strict=True):
        if not source.strip():
            raise DataError("empty source line", source_path, number)
        if not target.strip():
            raise DataError("empty target line", target_path, number)
        pairs.append(Pair(prefix + source, target, (source_path, number), {"source": source, "target": target}))
    return pairs


def _lines(path: str, encoding: str) -> list[tuple[int, str]]:
    """(line number, text without its ending) of one file."""
    (file,) = resolve_files(path)
    return [(number, line.rstrip("\r\n")) for number, line in iter_lines(file, encoding)]


def _text(record: dict[str, Any], field: str, where: Where) -> str:
    """A record's non-empty text field; a missing or empty one is a DataError at the row."""
    if record.get(field) is None:
        keys = ", ".join(repr(k) for k in record)
        raise DataError(f"missing field {field!r} (keys present: {keys})", *where)
    text = str(record[field])
    if not text.strip():
        raise DataError(f"empty text in field {field!r}", *where)
    return text


def read_sources(path: str, prefix: str, encoding: str) -> list[Pair]:
    """Sources to predict from a plain-text file, one per non-empty line."""
    (file,) = resolve_files(path)
    return [
        Pair(prefix + text, None, (str(file), number), {"source": text})
        for number, text in _lines(str(file), encoding)
        if text.strip()
    ]
