"""Read a file's lines, turning undecodable bytes into a DataError with line and byte offset."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tetraformer.data.errors import DataError

_BOM = "\ufeff"


def iter_lines(path: str | Path, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line with its ending) from a text file, decoding strictly."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    number, consumed, pending = 1, 0, ""
    with open(path, "rb") as handle:
        for raw in _binary_lines(handle):
            # bytes the decoder still holds from earlier reads (a character split across reads)
            buffered = len(decoder.getstate()[0])
            try:
                text = decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as err:
                raise _decode_error(path, number, consumed - buffered + err.start, err, encoding) from None
            if consumed == 0 and text.startswith(_BOM):
                text = text[1:]
            consumed += len(raw)
            *complete, pending = (pending + text).split("\n")
            for line in complete:
                yield number, line + "\n"
                number += 1
    if pending:
        yield number, pending


def _binary_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The file's binary lines, then b'' so the decoder flushes (final=True)."""
    yield from handle
    yield b""


def _decode_error(path: str | Path, line: int, offset: int, err: UnicodeDecodeError, encoding: str) -> DataError:
    """Name the offending byte, its offset in the file and the encoding tried."""
    bad = err.object[err.start : err.start + 1].hex()
    return DataError(
        f"cannot decode byte 0x{bad} at byte offset {offset} as {encoding} ({err.reason}); "
        "set the file's encoding with --data.encoding (e.g. --data.encoding latin-1)",
        path,
        line,
    )
