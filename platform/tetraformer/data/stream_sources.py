"""A source file's documents as numbered pieces, readable from any piece on: the positions a stream resumes from.

Plain text and JSONL/JSON/CSV/TSV are read by the validating readers of text.py (file:line errors), Parquet
(`.parquet`, `.pq`) a batch of rows at a time by hf_sources' table reader (file and row in errors). A piece is a
document, or a safe part of a long `documents: file` text (token_stream.corpus_pieces); pieces are numbered from 0
across the whole file, so (file, piece) names the same text whatever share of the file a reader keeps. Starting at
piece n skips the earlier ones without tokenizing them (Parquet skips whole row groups by their metadata).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from tetraformer.data.errors import DataError
from tetraformer.data.hf_sources import PARQUET_SUFFIXES, table_batches
from tetraformer.data.lines import iter_lines
from tetraformer.data.text import iter_documents, text_format
from tetraformer.data.token_stream import Encode, corpus_pieces

NumberedPiece = tuple[int, str, bool]  # piece number in its file, text, whether it ends its document


def source_format(path: str | Path, fmt: str) -> str:
    """'parquet' for a Parquet file read with format auto, else the text reader's format."""
    if fmt == "auto" and Path(path).suffix.lower() in PARQUET_SUFFIXES:
        return "parquet"
    return text_format(path) if fmt == "auto" else fmt


def one_document(path: str | Path, options: dict[str, Any]) -> bool:
    """Whether the file is one document (plain text read with `documents: file`), else one piece a document."""
    return source_format(path, options["format"]) == "text" and options["documents"] == "file"


def numbered_pieces(path: Path, options: dict[str, Any], encode: Encode, start: int = 0) -> Iterator[NumberedPiece]:
    """(piece number, text, ends its document) of one file, from piece `start` on (read_text's `options`)."""
    if source_format(path, options["format"]) == "parquet":
        yield from ((n, text, True) for n, text in parquet_texts(path, options["field"], start))
        return
    pieces = corpus_pieces([path], options, encode)
    yield from islice(((n, text, ends) for n, (text, ends) in enumerate(pieces)), start, None)


def source_texts(path: Path, options: dict[str, Any]) -> Iterator[str]:
    """A file's text in reading order without a tokenizer: a plain file's lines, else each document's text."""
    fmt = source_format(path, options["format"])
    if fmt == "parquet":
        yield from (text for _, text in parquet_texts(path, options["field"]))
    elif fmt == "text":
        yield from (line for _, line in iter_lines(path, options["encoding"]))
    else:
        yield from (f"{doc['text']}\n" for doc in iter_documents(path, **options))


def sample_text(files: list[Path], options: dict[str, Any], max_chars: int) -> str:
    """The first `max_chars` or so characters of the files' text, in order (to train a tokenizer on)."""
    parts: list[str] = []
    size = 0
    for path in files:
        for text in source_texts(path, options):
            parts.append(text)
            size += len(text)
            if size >= max_chars:
                return "".join(parts)
    return "".join(parts)


# --- Parquet ---------------------------------------------------------------------------------------
def parquet_texts(path: Path, field: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """(row number from 0, text) of a Parquet file's `field` column from row `start` on (hf_sources' table reader)."""
    import pyarrow as pa

    open_parquet(path, field)
    row = start
    try:
        for batch in table_batches(path, [field], start):
            for value in batch.column(0).to_pylist():
                if value is None:
                    raise DataError(f"row {row + 1}: column {field!r} is null; every row needs a text", path)
                yield row, value
                row += 1
    except (OSError, pa.ArrowException) as err:
        raise DataError(f"cannot read rows from row {row + 1} on ({one_line(err)})", path) from None


def open_parquet(path: Path, field: str) -> Any:
    """A pyarrow ParquetFile with a text column `field` and rows; a one-line DataError otherwise."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as err:
        raise DataError(f"not a readable Parquet file ({one_line(err)})", path) from None
    schema = parquet.schema_arrow
    if field not in schema.names:
        present = ", ".join(repr(name) for name in schema.names) or "none"
        raise DataError(f"missing column {field!r} (columns present: {present}); set --data.text_field", path)
    kind = schema.field(field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise DataError(f"column {field!r} holds {kind}, not text", path)
    if parquet.metadata.num_rows == 0:
        raise DataError("Parquet file has no rows", path)
    return parquet


def one_line(err: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(err).split()) or type(err).__name__
