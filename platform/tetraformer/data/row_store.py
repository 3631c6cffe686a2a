"""A row store: a task's tokenized rows on disk as Arrow tables, memory-mapped when read, built once per key.

Text classification, tagging, seq2seq and masked-LM rows are variable-length and mixed (token ids, per-id word
indices, raw label text, the file and line of each row, records kept to predict). Arrow holds them with offsets,
and `datasets` gives the rest: `Dataset.map` tokenizes in batches (fast tokenizers) and in parallel processes
(`num_proc`) with a progress bar, `save_to_disk` writes the tables and `load_from_disk` memory-maps them, so a
run's memory does not grow with its data. Token arrays of our own (token_store.py) suit language-model blocks,
which need no row boundaries; rows need them, and the columns beside the ids, so Arrow it is.

A store is a folder `CACHE_DIR/NAME-HASH/` with one `save_to_disk` folder per table (`rows`, and e.g.
`sentences`) and `manifest.json` (the key, each table's row count). HASH is a digest of the key: the source
files' identity (path, size, mtime), the tokenizer's content and every task option that changes the rows, never
the batch size. It is built in a hidden temporary folder and renamed into place (token_store.py's pieces), so a
build killed half-way leaves nothing that is reused; a later run with the same key reuses it ("reusing ..."), a
changed key builds a new one and logs which keys changed. As a token store's, the manifest records each file's
content checksum and the largest id of the id columns: a store whose files differ, whose ids pass the tokenizer's
vocabulary or that has no manifest is built again, with one warning.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tetraformer.data.errors import DataError
from tetraformer.data.files import file_identities
from tetraformer.data.store_integrity import checksum_damage, folder_checksums, partial_folder, remove_stale_partials
from tetraformer.data.token_store import (
    MANIFEST,
    move_into_place,
    read_manifest,
    remove_damaged,
    store_folder,
    wait_for_store,
    why_new,
)
from tetraformer.data.tokenizer import tokenizer_digest

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

ROW_FORMAT = 1  # bump when the tables' layout changes: older stores are then not reused
ROWS = "rows"  # the table every store has: one row per model input
BATCH_ROWS = 1000  # rows per tokenizer call
Tables = dict[str, "Dataset"]
Build = Callable[[Path], Tables]  # given a scratch folder (for `map`'s files), the tables to save


@dataclass(frozen=True)
class RowStore:
    """A built store: its folder and manifest; `table(name)` memory-maps a table."""

    path: Path
    manifest: dict[str, Any]

    @property
    def n_rows(self) -> int:
        """How many rows its `rows` table holds."""
        return int(self.manifest["tables"][ROWS])

    @property
    def size_bytes(self) -> int:
        """The store's files' size on disk."""
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())

    def summary(self) -> str:
        """'1.2 MB, 12,345 rows' (what `tetraformer prepare` prints)."""
        return f"{self.size_bytes / 1e6:.1f} MB, {self.n_rows:,} rows"

    def table(self, name: str = ROWS) -> Dataset:
        """A table, memory-mapped (nothing is read until rows are asked for)."""
        from datasets import load_from_disk

        return load_from_disk(str(self.path / name))


def row_store(
    name: str,
    files: list[Path],
    tokenizer: Any,
    options: dict[str, Any],
    build: Build,
    cache_dir: str | Path | None = None,
    build_here: bool = True,
    id_columns: Sequence[str] = (),
) -> RowStore:
    """The store of `files` tokenized with `tokenizer` under `options`: reused when built, else built now when
    `build_here` (logging why), else waited for (another rank builds it). The lists in `id_columns` hold token ids,
    checked against the tokenizer's vocabulary."""
    key = row_key(files, tokenizer, options)
    folder = store_folder(cache_dir, name, key)
    vocab_size = len(tokenizer) if tokenizer is not None else None
    if not build_here:
        return wait_for_store(folder, opener=lambda found: open_row_store(found, vocab_size=vocab_size))
    remove_stale_partials(folder.parent)
    store = open_row_store(folder, repair=True, vocab_size=vocab_size)
    if store is not None:
        logger.info("reusing the row store %s (%s rows)", folder, f"{store.n_rows:,}")
        return store
    logger.info("building the row store %s: %s", folder, why_new(folder.parent, name, key))
    return build_row_store(folder, key, build, tuple(id_columns), vocab_size)


def row_key(files: list[Path], tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What the rows depend on: the files' identities, the tokenizer's content and the task's row options."""
    return {"store_format": ROW_FORMAT, "files": file_identities(files), "tokenizer": tokenizer_digest(tokenizer)} | {
        k: options[k] for k in sorted(options)
    }


def open_row_store(folder: Path, repair: bool = False, vocab_size: int | None = None) -> RowStore | None:
    """The store in `folder` (its ids below `vocab_size` when given), or None when it is not built; a damaged one
    is removed when `repair` (one warning)."""
    if not folder.is_dir():
        return None
    manifest = read_manifest(folder)
    damage = "it has no readable manifest.json" if manifest is None else _damage(folder, manifest, vocab_size)
    if damage is None:
        return RowStore(folder, manifest)
    if repair:
        remove_damaged(folder, "row", damage)
    return None


def _damage(folder: Path, manifest: dict[str, Any], vocab_size: int | None) -> str | None:
    """What is wrong with a row store's files (against their checksums) or ids (against the vocabulary), or None."""
    max_id = manifest.get("max_id")
    if vocab_size is not None and max_id is not None and max_id >= vocab_size:
        return f"its ids reach {max_id}, past the tokenizer's {vocab_size} entries"
    return checksum_damage(folder, manifest.get("checksums"), skip=(MANIFEST,))


def build_row_store(
    folder: Path, key: dict[str, Any], build: Build, id_columns: tuple[str, ...] = (), vocab_size: int | None = None
) -> RowStore:
    """Build the tables into a hidden temporary folder beside `folder`, then rename it into place; ids of
    `id_columns` past `vocab_size` are a DataError."""
    partial = partial_folder(folder)
    start = time.monotonic()
    try:
        scratch = partial / ".scratch"
        scratch.mkdir()
        tables = build(scratch)
        max_id = largest_id(tables, id_columns)
        if vocab_size is not None and max_id is not None and max_id >= vocab_size:
            raise DataError(f"the tokenizer gave id {max_id}, past its own {vocab_size} entries")
        for name, table in tables.items():
            table.save_to_disk(str(partial / name))
        shutil.rmtree(scratch)
        manifest = {
            "key": key,
            "tables": {name: len(table) for name, table in tables.items()},
            "max_id": max_id,
            "checksums": folder_checksums(partial),
            "built": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "build_seconds": round(time.monotonic() - start, 3),
        }
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        return move_into_place(partial, folder, open_row_store)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def largest_id(tables: Tables, id_columns: tuple[str, ...]) -> int | None:
    """The largest value in the id lists of `id_columns` of every table that has them (None: no ids)."""
    import pyarrow.compute as pc

    found = [
        pc.max(pc.list_flatten(table.data.column(column))).as_py()
        for table in tables.values()
        for column in id_columns
        if column in table.column_names
    ]
    found = [value for value in found if value is not None]
    return max(found) if found else None


def tokenize_rows(
    source: Dataset,
    encode: Callable[[dict[str, list]], dict[str, list]],
    scratch: Path,
    num_proc: int = 1,
    desc: str = "tokenizing",
) -> Dataset:
    """`encode` over batches of `source`'s rows (`datasets.map`, `num_proc` processes, a progress bar); its output
    columns only, written under `scratch`. `encode` must pickle (a small object holding the tokenizer), not be a
    closure over a datamodule."""
    procs = max(1, min(num_proc, len(source)))
    start = time.monotonic()
    mapped = source.map(
        encode,
        batched=True,
        batch_size=BATCH_ROWS,
        num_proc=procs if procs > 1 else None,
        remove_columns=source.column_names,
        try_original_type=False,  # an output column named like an input one (label) keeps its own type
        cache_file_name=str(scratch / f"{uuid.uuid4().hex}.arrow"),
        new_fingerprint=uuid.uuid4().hex,  # a fresh folder: nothing to find by fingerprint, nothing to hash
        desc=desc,
    )
    seconds = time.monotonic() - start
    logger.info(
        "%s: %s -> %s rows in %.1f s (num_proc %d)", desc, f"{len(source):,}", f"{len(mapped):,}", seconds, procs
    )
    return mapped
