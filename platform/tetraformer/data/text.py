"""Validating readers for text corpora: plain text files, or JSONL/JSON/CSV/TSV with a text field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tetraformer.data.dataset import build_dataset
from tetraformer.data.errors import DataError, check_choice
from tetraformer.data.files import FileSpec, resolve_files
from tetraformer.data.hf_sources import is_table_file
from tetraformer.data.lines import iter_lines
from tetraformer.data.records import SUFFIX_FORMATS, iter_records, json_type

if TYPE_CHECKING:
    from datasets import Dataset

TextFormat = Literal["auto", "text", "jsonl", "json", "csv", "tsv"]
TableFormat = Literal["parquet", "arrow"]  # a table file's format, from its suffix whatever `format` says
TABLE_FORMATS: dict[str, TableFormat] = {".parquet": "parquet", ".arrow": "arrow"}
DocumentMode = Literal["file", "paragraph", "line"]


def read_text(
    files: FileSpec,
    format: TextFormat = "auto",  # noqa: A002 - the natural name, as in `datasets.load_dataset`
    field: str = "text",
    documents: DocumentMode = "file",
    encoding: str = "utf-8",
    suffixes: list[str] | None = None,
    cache_dir: str | Path | None = None,
) -> Dataset:
    """Read a text corpus into a Dataset with columns text, source (file path) and line (1-based start)."""
    from datasets import Features, Value

    features = Features({"text": Value("string"), "source": Value("string"), "line": Value("int64")})
    check_choice("format", format, TextFormat)
    check_choice("documents", documents, DocumentMode)
    paths = [str(p) for p in resolve_files(files, suffixes)]
    options = {"format": format, "field": field, "documents": documents, "encoding": encoding}
    return build_dataset(_generate_documents, paths, options, features, cache_dir)


def iter_documents(
    path: str | Path,
    format: TextFormat = "auto",  # noqa: A002
    field: str = "text",
    documents: DocumentMode = "file",
    encoding: str = "utf-8",
) -> Iterator[dict[str, str | int]]:
    """Yield {text, source, line} documents from one file, validating as it reads (a table: one per row)."""
    fmt = file_format(path, format)
    if fmt == "text":
        found = _plain_documents(path, documents, encoding)
    else:
        found = _record_documents(path, fmt, field, encoding)
    empty = True
    for text, line in found:
        empty = False
        yield {"text": text, "source": str(path), "line": line}
    if empty:
        raise DataError("file has no text (only blank lines)", path)


def text_format(path: str | Path) -> TextFormat | TableFormat:
    """The record format of .jsonl/.ndjson/.json/.csv/.tsv files, parquet/arrow for tables, 'text' for any other."""
    suffix = Path(path).suffix.lower()
    return TABLE_FORMATS.get(suffix) or SUFFIX_FORMATS.get(suffix, "text")


def file_format(path: str | Path, format: TextFormat = "auto") -> TextFormat | TableFormat:  # noqa: A002
    """How one file is read: `format`, or from its suffix when "auto"; a table file always as a table."""
    return text_format(path) if format == "auto" or is_table_file(path) else format


def _generate_documents(paths: list[str], **options: str) -> Iterator[dict[str, str | int]]:
    """Documents of all files, for the Dataset builder."""
    for path in paths:
        yield from iter_documents(path, **options)  # type: ignore[arg-type]


def _plain_documents(path: str | Path, documents: DocumentMode, encoding: str) -> Iterator[tuple[str, int]]:
    """(text, start line) per document: the whole file, blank-line-separated paragraphs, or lines."""
    lines = ((n, line.replace("\r\n", "\n")) for n, line in iter_lines(path, encoding))
    if documents == "file":
        text = "".join(line for _, line in lines)
        if text.strip():
            yield text, 1
    elif documents == "paragraph":
        yield from _paragraphs(lines)
    else:
        check_choice("documents", documents, DocumentMode)
        yield from ((line.rstrip("\n"), n) for n, line in lines if line.strip())


def _paragraphs(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[str, int]]:
    """Group non-blank lines into paragraphs separated by blank (whitespace-only) lines."""
    block: list[str] = []
    start = 0
    for number, line in lines:
        if line.strip():
            start = start if block else number
            block.append(line)
        elif block:
            yield "".join(block).rstrip("\n"), start
            block = []
    if block:
        yield "".join(block).rstrip("\n"), start


def _record_documents(path: str | Path, fmt: str, field: str, encoding: str) -> Iterator[tuple[str, int]]:
    """(text, line) per record; the field must be present and a string."""
    for record in iter_records(path, fmt, [field], encoding):  # type: ignore[arg-type]
        value = record.data[field]
        if not isinstance(value, str):
            raise record.error(f"field {field!r} must be a string, got {json_type(value)}")
        yield value, record.line
