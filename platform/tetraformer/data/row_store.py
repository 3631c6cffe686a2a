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
changed key builds a new one and logs which keys changed.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tetraformer.data.files import file_identities
from tetraformer.data.token_store import (
    MANIFEST,
    move_into_place,
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
) -> RowStore:
    """The store of `files` tokenized with `tokenizer` under `options`: reused when built, else built now when
    `build_here` (logging why), else waited for (another rank builds it)."""
    key = row_key(files, tokenizer, options)
    folder = store_folder(cache_dir, name, key)
    if not build_here:
        return wait_for_store(folder, opener=open_row_store)
    store = open_row_store(folder, repair=True)
    if store is not None:
        logger.info("reusing the row store %s (%s rows)", folder, f"{store.n_rows:,}")
        return store
    logger.info("building the row store %s: %s", folder, why_new(folder.parent, name, key))
    return build_row_store(folder, key, build)


def row_key(files: list[Path], tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What the rows depend on: the files' identities, the tokenizer's content and the task's row options."""
    return {"store_format": ROW_FORMAT, "files": file_identities(files), "tokenizer": tokenizer_digest(tokenizer)} | {
        k: options[k] for k in sorted(options)
    }


def open_row_store(folder: Path, repair: bool = False) -> RowStore | None:
    """The store in `folder`, or None when it is not built; a damaged one is removed when `repair` (logged)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    missing = [name for name in manifest.get("tables", {}) if not _saved_table(folder / name)]
    if not missing:
        return RowStore(folder, manifest)
    if repair:
        logger.warning("the row store %s is damaged (no whole table %s): building it again", folder, missing[0])
        shutil.rmtree(folder, ignore_errors=True)
    return None


def _saved_table(folder: Path) -> bool:
    """Whether a `save_to_disk` folder has its state and every data file it lists."""
    try:
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return all((folder / f["filename"]).is_file() for f in state.get("_data_files", []))


def build_row_store(folder: Path, key: dict[str, Any], build: Build) -> RowStore:
    """Build the tables into a hidden temporary folder beside `folder`, then rename it into place."""
    partial = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".partial-{folder.name}-"))
    start = time.monotonic()
    try:
        scratch = partial / ".scratch"
        scratch.mkdir()
        tables = build(scratch)
        for name, table in tables.items():
            table.save_to_disk(str(partial / name))
        shutil.rmtree(scratch)
        manifest = {
            "key": key,
            "tables": {name: len(table) for name, table in tables.items()},
            "built": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "build_seconds": round(time.monotonic() - start, 3),
        }
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        return move_into_place(partial, folder, open_row_store)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


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
