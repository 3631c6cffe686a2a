"""Stream a text corpus through a fast tokenizer in bounded memory: documents, or safe pieces of a long one.

A one-file corpus read with `documents: file` is one document; encoding it in one call holds its whole text and
token list at once. It is cut instead into pieces of about `chunk_chars` characters at line ends where the cut
cannot change the tokens: a *seam* is accepted only where the two lines before it and the line after it encode
to the same ids together as apart (`first_safe_seam`). Pre-tokenizers split text by scanning it from left to right
(byte-level BPE's regex, BERT's whitespace/punctuation split, per-character splits, Metaspace), so a cut where
the local encodings agree is a cut the whole document's encoding makes too; tests/data/test_token_stream.py
checks chunked == whole for every tokenizer type Tetraformer trains. Where no line end in a document is a safe
seam (one line, or a pre-tokenizer that joins every line to the next), the document is encoded in one piece.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from tetraformer.data.errors import DataError
from tetraformer.data.lines import iter_lines
from tetraformer.data.text import file_format, iter_documents

logger = logging.getLogger(__name__)

Piece = tuple[str, bool]  # text, and whether it ends its document (an end-of-document token follows)
Encode = Callable[[list[str]], list[list[int]]]
CHUNK_CHARS = 1 << 16  # a long document's pieces: ~64k characters each
SEAM_WINDOW = 16  # line ends checked for a safe cut in one batch call
BATCH_CHARS = 1 << 21  # one batch encoding call: at most ~2M characters ...
BATCH_TEXTS = 1000  # ... and at most this many texts


def batch_encoder(tokenizer: Any) -> Encode:
    """Encode a list of texts without special tokens (a fast tokenizer encodes a batch on all cores): through the
    `tokenizers` backend's `encode_batch_fast` where there is one (no offsets, no BatchEncoding: about twice as fast
    as the transformers call on the same batch), else the tokenizer's own call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "encode_batch_fast"):

        def encode_fast(texts: list[str]) -> list[list[int]]:
            return [encoding.ids for encoding in backend.encode_batch_fast(texts, add_special_tokens=False)]

        return encode_fast

    def encode(texts: list[str]) -> list[list[int]]:
        encoded = tokenizer(texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False)
        return encoded["input_ids"]

    return encode


def first_safe_seam(encode: Encode, lines: list[str], start: int) -> int | None:
    """The first i >= start (and >= 2) where cutting `lines` before line i leaves the tokens of lines i-2, i-1 and i
    as encoding them together gives; one batch call checks them all. None when there is none."""
    cuts = list(range(max(start, 2), len(lines)))
    texts = [text for i in cuts for text in ("".join(lines[i - 2 : i + 1]), "".join(lines[i - 2 : i]), lines[i])]
    encoded = encode(texts) if texts else []
    for n, i in enumerate(cuts):
        together, left, right = encoded[3 * n : 3 * n + 3]
        if together == left + right:
            return i
    return None


def corpus_pieces(
    files: Iterable[Path], options: dict[str, Any], encode: Encode, chunk_chars: int = CHUNK_CHARS
) -> Iterator[Piece]:
    """The corpus's documents in order (files as given), long `documents: file` texts in safe pieces."""
    for path in files:
        fmt = file_format(path, options["format"])
        if fmt == "text" and options["documents"] == "file":
            yield from file_pieces(path, options["encoding"], encode, chunk_chars)
        else:
            yield from ((str(doc["text"]), True) for doc in iter_documents(path, **options))


def file_pieces(path: Path, encoding: str, encode: Encode, chunk_chars: int = CHUNK_CHARS) -> Iterator[Piece]:
    """One plain-text file as one document, in pieces cut at safe seams once a piece reaches `chunk_chars`."""
    lines = (line.replace("\r\n", "\n") for _, line in iter_lines(path, encoding))
    piece: list[str] = []
    size, has_text, searched, check_at = 0, False, 0, chunk_chars
    for line in lines:
        has_text = has_text or not line.isspace()
        piece.append(line)
        size += len(line)
        if size < check_at:
            searched = len(piece)  # the cuts checked start where the piece is long enough
        elif len(piece) - searched >= SEAM_WINDOW:
            cut = first_safe_seam(encode, piece, searched)
            if cut is not None:
                yield "".join(piece[:cut]), False
                piece = piece[cut:]
                size = sum(len(kept) for kept in piece)
            # no safe cut: look again a quarter chunk on, so text without safe seams costs few extra encodings
            check_at = chunk_chars if cut is not None else size + chunk_chars // 4
            searched = len(piece)
    if not has_text:
        raise DataError("file has no text (only blank lines)", path)
    yield "".join(piece), True


def batches(
    pieces: Iterable[Piece], max_chars: int = BATCH_CHARS, max_texts: int = BATCH_TEXTS
) -> Iterator[list[Piece]]:
    """Consecutive pieces grouped into batches of at most `max_texts` texts and about `max_chars` characters."""
    batch: list[Piece] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece[0])
        if size >= max_chars or len(batch) >= max_texts:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


class Progress:
    """Characters tokenized so far against the corpus's size: a tqdm bar on a terminal, else a log line a minute."""

    def __init__(self, total_bytes: int, label: str, every_s: float = 60.0) -> None:
        self.total, self.label, self.every_s = total_bytes, label, every_s
        self.done, self.tokens, self.start = 0, 0, time.monotonic()
        self.last = self.start
        self.bar = _terminal_bar(total_bytes, label)

    def update(self, chars: int, tokens: int) -> None:
        """Count a batch; log a line when a minute has passed since the last one (no terminal)."""
        self.done, self.tokens = self.done + chars, self.tokens + tokens
        if self.bar is not None:
            self.bar.update(chars)
            return
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            logger.info("%s: %s", self.label, self.line())

    def line(self) -> str:
        """'45% of 100.0 MB, 12,345,678 tokens, 3.2 MB/s'."""
        seconds = max(time.monotonic() - self.start, 1e-9)
        share = min(self.done / self.total, 1.0) if self.total else 1.0
        return f"{share:.0%} of {self.total / 1e6:.1f} MB, {self.tokens:,} tokens, {self.done / 1e6 / seconds:.1f} MB/s"

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()


def _terminal_bar(total: int, label: str) -> Any:
    """A tqdm bar counting characters when stderr is a terminal, else None."""
    if not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit="B", unit_scale=True, leave=False)
