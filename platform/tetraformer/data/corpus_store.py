"""A text corpus tokenized once into a token store, keyed by its files, the tokenizer and the reading options.

Each document's ids are followed by the tokenizer's end-of-document (eos) token, as `pack_documents` packs them;
blocks are cut from the store later (`token_blocks`), so the block size is not part of the key. The fast
tokenizer's batch calls already run on every core; with `num_proc` > 1 and several files, whole files are
tokenized in that many processes as well (their Python reading and packing then run in parallel too), and
written in the files' order, so the store is the same whatever `num_proc` is.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Iterable, Iterator
from functools import partial
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
    num_proc: int = 1,
) -> TokenStore:
    """The store of a corpus read with `options` (read_text's): reused, or built when `build` (files tokenized in
    `num_proc` processes), else waited for."""
    paths = resolve_files(files)
    key = corpus_key(paths, tokenizer, options)
    if not build:
        return wait_for_store(store_folder(cache_dir, name, key))
    write = partial(write_corpus, paths=paths, tokenizer=tokenizer, options=options, num_proc=num_proc)
    return prepare_store(cache_dir, name, key, len(tokenizer), write)


def corpus_key(paths: list[Path], tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What the store's ids depend on: file identities (path, size, mtime), tokenizer content, read options."""
    return {
        "store_format": STORE_FORMAT,
        "files": file_identities(paths),
        "tokenizer": tokenizer_digest(tokenizer),
        **{("text_field" if k == "field" else k): options[k] for k in READ_OPTIONS},
        "end_of_document": tokenizer.eos_token,
    }


def write_corpus(
    writer: StoreWriter, paths: list[Path], tokenizer: Any, options: dict[str, Any], num_proc: int = 1
) -> dict[str, Any]:
    """Tokenize the corpus into the writer, eos after each document, file after file; returns manifest extras."""
    if tokenizer.eos_token_id is None:
        raise DataError("the tokenizer has no eos token to separate documents")
    read = {k: options[k] for k in READ_OPTIONS}
    progress = Progress(sum(p.stat().st_size for p in paths), f"tokenizing {len(paths)} file(s)")
    start = time.monotonic()
    try:
        for ids, ends, chars in _encoded_parts(paths, tokenizer, read, writer.dtype, num_proc):
            writer.write(ids, ends)
            progress.update(chars, len(ids))
    finally:
        progress.close()
    seconds = time.monotonic() - start
    logger.info("tokenized %s", progress.line())
    return {"tokenize_seconds": round(seconds, 3)}


Part = tuple[np.ndarray, np.ndarray, int]  # ids, document ends within them, characters read


def _encoded_parts(
    paths: list[Path], tokenizer: Any, read: dict[str, Any], dtype: np.dtype, num_proc: int
) -> Iterable[Part]:
    """The corpus's encoded batches in order: in this process, or whole files from a pool of `num_proc`."""
    if num_proc <= 1 or len(paths) <= 1:
        return _batch_parts(paths, tokenizer, read, dtype)
    context = multiprocessing.get_context("spawn")  # a forked child of a process whose tokenizer ran threads hangs
    pool = context.Pool(min(num_proc, len(paths)), _start_worker, (tokenizer, read, dtype))
    return _pooled(pool, paths)


def _pooled(pool: Any, paths: list[Path]) -> Iterator[Part]:
    """Files' parts from the pool in the files' order; the pool ends with the iteration."""
    with pool:
        yield from pool.imap(_file_part, paths)


def _batch_parts(paths: list[Path], tokenizer: Any, read: dict[str, Any], dtype: np.dtype) -> Iterator[Part]:
    """Each batch of pieces of the files, encoded (ids, document ends, characters)."""
    encode = batch_encoder(tokenizer)
    for batch in batches(corpus_pieces(paths, read, encode)):
        ids, ends = encode_batch(encode, batch, tokenizer.eos_token_id, dtype)
        yield ids, ends, sum(len(text) for text, _ in batch)


_WORKER: dict[str, Any] = {}  # a pool process's tokenizer, read options and dtype


def _start_worker(tokenizer: Any, read: dict[str, Any], dtype: np.dtype) -> None:
    """Keep what every file of this pool process is encoded with."""
    _WORKER.update(tokenizer=tokenizer, read=read, dtype=dtype)


def _file_part(path: Path) -> Part:
    """One whole file encoded in a pool process: its batches joined."""
    parts = list(_batch_parts([path], _WORKER["tokenizer"], _WORKER["read"], _WORKER["dtype"]))
    lengths = np.cumsum([0] + [len(ids) for ids, _, _ in parts[:-1]], dtype=np.int64)
    ids = np.concatenate([ids for ids, _, _ in parts]) if parts else np.zeros(0, _WORKER["dtype"])
    ends = (
        np.concatenate([ends + offset for (_, ends, _), offset in zip(parts, lengths, strict=True)])
        if parts
        else np.zeros(0, np.int64)
    )
    return ids, ends, sum(chars for _, _, chars in parts)


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
