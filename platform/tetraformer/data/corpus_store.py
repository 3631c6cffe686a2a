"""A text corpus tokenized once into a store (data/store.py) whose `tokens` table holds its ids, keyed by its files,
the tokenizer and the reading options; or the first documents of a streamed corpus, held out for validation.

Each row of `tokens` is a document's ids followed by the tokenizer's end-of-document (eos) token, as
`pack_documents` packs them, or a safe piece of a long `documents: file` text (data/token_stream.py; eos after its
last piece); the ids are uint16 when the vocabulary has at most 65536 entries, else uint32. Blocks are cut from
the flat ids later (`token_blocks`), so the block size is not part of the key. The rows are written with pyarrow a
batch of pieces at a time (memory stays flat in the corpus's size) and saved as a `datasets` table. The fast
tokenizer's batch calls already run on every core; with `num_proc` > 1 and several files, whole files are
tokenized in that many processes as well, and written in the files' order, so the store is the same whatever
`num_proc` is.

The held-out part of a stream (`held_out_store`) is the first `n_documents` documents of the files in their
resolved (sorted) order, the same on every run and rank; its key adds that count, and its manifest records where
it ends (`held_out`: files wholly held out, then pieces held out of the next file), which is where the training
stream starts (`training_sources`).
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tetraformer.data.errors import DataError
from tetraformer.data.files import FileSpec, resolve_files
from tetraformer.data.store import ARROW, Notes, Store, Tables, prepare_store, store_key
from tetraformer.data.stream_sources import numbered_pieces
from tetraformer.data.token_stream import Encode, Piece, Progress, batch_encoder, batches, corpus_pieces

logger = logging.getLogger(__name__)
READ_OPTIONS = ("format", "field", "documents", "encoding")  # read_text's options: each changes the tokens
TOKENS = "tokens"  # a corpus store's table: one row of ids per document or piece
Part = tuple[np.ndarray, np.ndarray, int]  # flat ids, each piece's length in them, characters read
Parts = Callable[[np.dtype], Iterable[Part]]  # the encoded parts of a corpus, ids of the given dtype
Source = tuple[Path, int]  # a file, and its first piece that training reads


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype holding ids 0 .. vocab_size - 1."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def corpus_store(
    name: str,
    files: FileSpec,
    tokenizer: Any,
    options: dict[str, Any],
    cache_dir: str | Path | None = None,
    build: bool = True,
    num_proc: int = 1,
) -> Store:
    """The store of a corpus read with `options` (read_text's): reused, or built when `build` (files tokenized in
    `num_proc` processes), else waited for."""
    paths = resolve_files(files)
    writer = CorpusWriter(tokenizer, lambda dtype: write_corpus(paths, tokenizer, options, dtype, num_proc))
    return writer.store(name, corpus_key(paths, tokenizer, options), cache_dir, build)


def held_out_store(
    name: str,
    files: FileSpec,
    tokenizer: Any,
    options: dict[str, Any],
    n_documents: int,
    cache_dir: str | Path | None = None,
    build: bool = True,
) -> Store:
    """The store of the corpus's first `n_documents` documents: reused, or built when `build`, else waited for."""
    paths = resolve_files(files)
    key = {**corpus_key(paths, tokenizer, options), "held_out_documents": n_documents}
    part = HeldOut(paths, {k: options[k] for k in READ_OPTIONS}, batch_encoder(tokenizer), n_documents)
    writer = CorpusWriter(tokenizer, lambda dtype: _batch_parts(part.pieces(), tokenizer, dtype), part.notes)
    return writer.store(name, key, cache_dir, build)


def corpus_key(paths: list[Path], tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What the store's ids depend on: file identities (path, size, mtime), tokenizer content, read options."""
    read = {("text_field" if k == "field" else k): options[k] for k in READ_OPTIONS}
    return store_key(paths, tokenizer, {**read, "end_of_document": tokenizer.eos_token})


def n_tokens(store: Store) -> int:
    """How many ids a corpus store holds."""
    return int(store.manifest["n_tokens"])


class CorpusWriter:
    """Writes encoded parts into a corpus store's `tokens` table, a record batch per part."""

    def __init__(self, tokenizer: Any, parts: Parts, notes: Notes = dict) -> None:
        if tokenizer.eos_token_id is None:
            raise DataError("the tokenizer has no eos token to separate documents")
        self.vocab_size, self.parts, self.extra = len(tokenizer), parts, notes
        self.dtype = token_dtype(self.vocab_size)
        self.n_tokens = self.max_id = 0  # ids written, the largest of them
        self.seconds = 0.0

    def store(self, name: str, key: dict[str, Any], cache_dir: str | Path | None, build: bool) -> Store:
        """The store of `key`: reused, built now when `build`, else waited for."""
        return prepare_store(name, key, self.tables, cache_dir, build, self.vocab_size, notes=self.notes, kind="corpus")

    def tables(self, scratch: Path) -> Tables:
        """Write every part into an Arrow stream file under `scratch`; the `tokens` table mapping it."""
        from datasets import Dataset

        path = scratch / f"{TOKENS}{ARROW}"
        values = pa.from_numpy_dtype(self.dtype)
        schema = pa.schema([pa.field("input_ids", pa.list_(pa.field("item", values)))])
        start = time.monotonic()
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as stream:
            for ids, lengths, _ in self.parts(self.dtype):
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
                rows = pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids, values))
                stream.write_batch(pa.record_batch([rows], schema=schema))
                self.n_tokens += len(ids)
                self.max_id = max(self.max_id, int(ids.max(initial=0)))
        self.seconds = time.monotonic() - start
        return {TOKENS: Dataset.from_file(str(path))}

    def notes(self) -> dict[str, Any]:
        """The manifest's corpus entries: ids, their dtype, the tokenizing time and the parts' own notes."""
        timing = {"tokenize_seconds": round(self.seconds, 3)}
        return {"n_tokens": self.n_tokens, "max_id": self.max_id, "dtype": self.dtype.name, **timing, **self.extra()}


def write_corpus(
    paths: list[Path], tokenizer: Any, options: dict[str, Any], dtype: np.dtype, num_proc: int = 1
) -> Iterator[Part]:
    """The corpus's encoded parts, eos after each document, file after file, with a progress line."""
    read = {k: options[k] for k in READ_OPTIONS}
    progress = Progress(sum(p.stat().st_size for p in paths), f"tokenizing {len(paths)} file(s)")
    try:
        for ids, lengths, chars in _encoded_parts(paths, tokenizer, read, dtype, num_proc):
            progress.update(chars, len(ids))
            yield ids, lengths, chars
    finally:
        progress.close()
    logger.info("tokenized %s", progress.line())


def _encoded_parts(
    paths: list[Path], tokenizer: Any, read: dict[str, Any], dtype: np.dtype, num_proc: int
) -> Iterable[Part]:
    """The corpus's encoded batches in order: in this process, or whole files from a pool of `num_proc`."""
    if num_proc <= 1 or len(paths) <= 1:
        return _batch_parts(corpus_pieces(paths, read, batch_encoder(tokenizer)), tokenizer, dtype)
    context = multiprocessing.get_context("spawn")  # a forked child of a process whose tokenizer ran threads hangs
    pool = context.Pool(min(num_proc, len(paths)), _start_worker, (tokenizer, read, dtype))
    return _pooled(pool, paths)


def _pooled(pool: Any, paths: list[Path]) -> Iterator[Part]:
    """Files' parts from the pool in the files' order; the pool ends with the iteration."""
    with pool:
        for parts in pool.imap(_file_parts, paths):
            yield from parts


def _batch_parts(pieces: Iterable[Piece], tokenizer: Any, dtype: np.dtype) -> Iterator[Part]:
    """Each batch of the pieces, encoded (ids, piece lengths, characters)."""
    encode = batch_encoder(tokenizer)
    for batch in batches(pieces):
        ids, lengths = encode_batch(encode, batch, tokenizer.eos_token_id, dtype)
        yield ids, lengths, sum(len(text) for text, _ in batch)


_WORKER: dict[str, Any] = {}  # a pool process's tokenizer, read options and dtype


def _start_worker(tokenizer: Any, read: dict[str, Any], dtype: np.dtype) -> None:
    """Keep what every file of this pool process is encoded with."""
    _WORKER.update(tokenizer=tokenizer, read=read, dtype=dtype)


def _file_parts(path: Path) -> list[Part]:
    """One whole file encoded in a pool process, batch by batch."""
    tokenizer, read = _WORKER["tokenizer"], _WORKER["read"]
    return list(_batch_parts(corpus_pieces([path], read, batch_encoder(tokenizer)), tokenizer, _WORKER["dtype"]))


def encode_batch(encode: Encode, batch: list[Piece], eos: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """A batch's ids in one flat array, eos after each document's last piece, and each piece's length in it."""
    encoded = encode([text for text, _ in batch])
    lengths = np.fromiter((len(ids) + ends for ids, (_, ends) in zip(encoded, batch, strict=True)), np.int64)
    flat = np.empty(int(lengths.sum()), dtype)
    at = 0
    for ids, (_, ends) in zip(encoded, batch, strict=True):
        flat[at : at + len(ids)] = ids
        at += len(ids)
        if ends:
            flat[at] = eos
            at += 1
    return flat, lengths


# --- the held-out start of a stream -------------------------------------------------------------------
def training_sources(files: FileSpec, store: Store | None = None) -> list[Source]:
    """The files training streams, each with its first piece: those after the held-out part of `store`, if any."""
    paths = resolve_files(files)
    if store is None:
        return [(path, 0) for path in paths]
    held = store.manifest["held_out"]
    whole, pieces = int(held["files"]), int(held["pieces"])
    return [(path, pieces if index == whole else 0) for index, path in enumerate(paths) if index >= whole]


class HeldOut:
    """Reads the first documents of a corpus; afterwards `notes` says where they end."""

    def __init__(self, paths: list[Path], options: dict[str, Any], encode: Encode, n_documents: int) -> None:
        self.paths, self.options, self.encode, self.n_documents = paths, options, encode, n_documents
        self.whole_files = self.cut_pieces = 0

    def pieces(self) -> Iterator[Piece]:
        """The held-out pieces; a DataError when no document is left for training after them."""
        documents = 0
        for index, path in enumerate(self.paths):
            for number, text, ends in numbered_pieces(path, self.options, self.encode):
                if documents == self.n_documents:  # a document follows the held-out ones: training has data
                    self.whole_files, self.cut_pieces = index, number
                    return
                documents += ends
                yield text, ends
        raise DataError(
            f"--data.val_documents {self.n_documents} holds out every document of the training files "
            f"({documents}), leaving none to train on: lower it, or set --data.val_path"
        )

    def notes(self) -> dict[str, Any]:
        """Where the held-out part ends: files wholly held out, then pieces of the next one."""
        return {"held_out": {"files": self.whole_files, "pieces": self.cut_pieces}}
