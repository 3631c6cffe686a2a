"""A text corpus tokenized once into a token store, keyed by its files, the tokenizer and the reading options.

Each document's ids are followed by the tokenizer's end-of-document (eos) token, as `pack_documents` packs them;
blocks are cut from the store later (`token_blocks`), so the block size is not part of the key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from tetraformer.data.errors import DataError
from tetraformer.data.files import FileSpec, file_identities, resolve_files
from tetraformer.data.token_store import (
    STORE_FORMAT,
    StoreWriter,
    TokenStore,
    prepare_store,
    store_folder,
    token_dtype,
    wait_for_store,
)
from tetraformer.data.token_stream import Encode, Piece, Progress, batch_encoder, batches, corpus_pieces
from tetraformer.data.tokenizer import tokenizer_digest

logger = logging.getLogger(__name__)
READ_OPTIONS = ("format", "field", "documents", "encoding")  # read_text's options: each changes the tokens


def corpus_store(
    name: str,
    files: FileSpec,
    tokenizer: Any,
    options: dict[str, Any],
    cache_dir: str | Path | None = None,
    build: bool = True,
) -> TokenStore:
    """The store of a corpus read with `options` (read_text's): reused, or built when `build`, else waited for."""
    paths = resolve_files(files)
    key = corpus_key(paths, tokenizer, options)
    dtype = token_dtype(len(tokenizer))
    if not build:
        return wait_for_store(store_folder(cache_dir, name, key))
    return prepare_store(cache_dir, name, key, dtype, lambda writer: write_corpus(writer, paths, tokenizer, options))


def corpus_key(paths: list[Path], tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What the store's ids depend on: file identities (path, size, mtime), tokenizer content, read options."""
    return {
        "store_format": STORE_FORMAT,
        "files": file_identities(paths),
        "tokenizer": tokenizer_digest(tokenizer),
        **{("text_field" if k == "field" else k): options[k] for k in READ_OPTIONS},
        "end_of_document": tokenizer.eos_token,
    }


def write_corpus(writer: StoreWriter, paths: list[Path], tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Tokenize the corpus batch by batch into the writer, eos after each document; returns manifest extras."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise DataError("the tokenizer has no eos token to separate documents")
    encode = batch_encoder(tokenizer)
    progress = Progress(sum(p.stat().st_size for p in paths), f"tokenizing {len(paths)} file(s)")
    start = time.monotonic()
    try:
        for batch in batches(corpus_pieces(paths, {k: options[k] for k in READ_OPTIONS}, encode)):
            ids, ends = encode_batch(encode, batch, eos, writer.dtype)
            writer.write(ids, ends)
            progress.update(sum(len(text) for text, _ in batch), len(ids))
    finally:
        progress.close()
    seconds = time.monotonic() - start
    logger.info("tokenized %s", progress.line())
    return {"tokenize_seconds": round(seconds, 3)}


def encode_batch(encode: Encode, batch: list[Piece], eos: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """A batch's ids in one flat array, eos after each document's last piece, and the offsets after each eos."""
    encoded = encode([text for text, _ in batch])
    ends_document = [ends for _, ends in batch]
    lengths = np.fromiter((len(ids) + ends for ids, ends in zip(encoded, ends_document, strict=True)), np.int64)
    flat = np.fromiter(_with_eos(encoded, ends_document, eos), dtype, count=int(lengths.sum()))
    return flat, np.cumsum(lengths)[np.asarray(ends_document, bool)]


def _with_eos(encoded: list[list[int]], ends_document: list[bool], eos: int) -> Iterator[int]:
    """The ids of each piece, followed by eos where the piece ends its document."""
    pieces = zip(encoded, ends_document, strict=True)
    return chain.from_iterable(chain(ids, (eos,)) if ends else ids for ids, ends in pieces)
