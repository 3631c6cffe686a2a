"""A store: a task's tokenized data on disk as Arrow tables with one manifest, memory-mapped when read, built once per
key. Every task keeps its data in one: language-model corpora (data/corpus_store.py) and the rows of the others.

A store is a folder `CACHE_DIR/NAME-HASH/` with one Arrow stream file per table (`rows.arrow`, or `tokens.arrow` for a
corpus, and e.g. `sentences.arrow`; the format `datasets` writes its tables in) and `manifest.json` (the key, each
table's row count, the largest id, each file's content checksum, and what the builder notes). HASH is a digest of the
key: the source files' identity (path, size, mtime), the tokenizer's content and every option that changes the data,
never the batch or block size. It is built in a hidden `.partial-*` folder and renamed into place, so a build killed
half-way leaves nothing that is reused (data/store_integrity.py removes its folder later); a later run with the same key
reuses it ("reusing ..."), a changed key builds a new one and logs which keys changed. A store whose files differ from
their checksums, whose ids pass the tokenizer's vocabulary or that has no manifest is built again, with one warning.

`datasets` gives the tables: `Dataset.map` tokenizes rows in batches and in `num_proc` processes with a progress bar
(`tokenize_rows`) and `Dataset.from_file` memory-maps a table, so a run's memory does not grow with its data; a corpus's
flat ids are read from the same mapped table by offset (data/token_blocks.py). A table is written record batch by record
batch; one the builder already wrote as `SCRATCH/NAME.arrow` (a corpus's) is moved in as it is. Not `save_to_disk`: it
copies a written table once more (measured on a 49 MB corpus, 13.4M ids: the copy mapped the 27 MB table, so peak RSS
rose with the corpus, 386 -> 410 MB from 2.1M to 13.4M ids).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tetraformer.data.errors import DataError
from tetraformer.data.files import file_identities
from tetraformer.data.store_integrity import checksum_damage, folder_checksums, partial_folder, remove_stale_partials
from tetraformer.data.tokenizer import tokenizer_digest
from tetraformer.errors import ConfigError
from tetraformer.files import cache_root

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

STORE_FORMAT = 2  # bump when the layout changes: older stores are then not reused (2: one Arrow format for all)
MANIFEST, ARROW = "manifest.json", ".arrow"
ROWS = "rows"  # the table a task's store has: one row per model input
BATCH_ROWS = 1000  # rows per tokenizer call
CACHE_OPTION = "--data.cache_dir"
WAIT_S = 3600.0  # how long a rank waits for the rank that builds a store
Tables = dict[str, "Dataset"]
Build = Callable[[Path], Tables]  # given a scratch folder (for `map`'s files), the tables to save
Notes = Callable[[], dict[str, Any]]  # after a build: what the builder adds to the manifest


@dataclass(frozen=True)
class Store:
    """A built store: its folder and manifest; `table(name)` memory-maps a table."""

    path: Path
    manifest: dict[str, Any]

    @property
    def n_rows(self) -> int:
        """How many rows its `rows` table (else its first) holds."""
        tables = self.manifest["tables"]
        return int(tables.get(ROWS, next(iter(tables.values()))))

    @property
    def size_bytes(self) -> int:
        """The store's files' size on disk."""
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())

    def counts(self) -> str:
        """'12,345 rows', with a corpus's ids: '12,345 rows, 4,567,890 uint16 tokens'."""
        tokens = self.manifest.get("n_tokens")
        return f"{self.n_rows:,} rows" + ("" if tokens is None else f", {tokens:,} {self.manifest['dtype']} tokens")

    def summary(self) -> str:
        """'1.2 MB, 12,345 rows' (what `tetraformer prepare` prints)."""
        return f"{self.size_bytes / 1e6:.1f} MB, {self.counts()}"

    def table(self, name: str = ROWS) -> Dataset:
        """A table, memory-mapped (nothing is read until rows are asked for)."""
        from datasets import Dataset

        return Dataset.from_file(str(self.path / f"{name}{ARROW}"))


def default_cache_dir() -> Path:
    """Where stores go unless --data.cache_dir says: `token_stores/` in Tetraformer's cache folder."""
    return cache_root() / "token_stores"


def store_key(files: Sequence[Path], tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What a store's data depends on: the files' identities, the tokenizer's content and the options given."""
    head = {"store_format": STORE_FORMAT, "files": file_identities(files), "tokenizer": tokenizer_digest(tokenizer)}
    return head | {k: options[k] for k in sorted(options)}


def key_digest(key: dict[str, Any]) -> str:
    """A short, stable hash of a store key."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def prepare_store(
    name: str,
    key: dict[str, Any],
    build: Build,
    cache_dir: str | Path | None = None,
    build_here: bool = True,
    vocab_size: int | None = None,
    id_columns: Sequence[str] = (),
    notes: Notes = dict,
    kind: str = "row",
) -> Store:
    """The store of `key` under `cache_dir`: reused when built and whole, else built now when `build_here` (logging
    why), else waited for (another rank builds it). The lists in `id_columns` hold ids below `vocab_size`; `kind`
    ("row", or "corpus") names it in the log."""
    folder = store_folder(cache_dir, name, key)
    if not build_here:
        return wait_for_store(folder, vocab_size=vocab_size)
    remove_stale_partials(folder.parent)
    store = open_store(folder, repair=True, vocab_size=vocab_size, kind=kind)
    if store is not None:
        logger.info("reusing the %s store %s (%s)", kind, folder, store.counts())
        return store
    logger.info("building the %s store %s: %s", kind, folder, why_new(folder.parent, name, key))
    return build_store(folder, key, build, tuple(id_columns), vocab_size, notes)


def store_folder(cache_dir: str | Path | None, name: str, key: dict[str, Any]) -> Path:
    """The folder of `key`'s store in the (writable) cache folder."""
    return writable_cache(cache_dir) / f"{name}-{key_digest(key)}"


def open_store(folder: Path, repair: bool = False, vocab_size: int | None = None, kind: str = "row") -> Store | None:
    """The store in `folder` (its ids below `vocab_size` when given), or None when it is not built; a damaged one
    is removed when `repair` (one warning)."""
    if not folder.is_dir():
        return None
    manifest = read_manifest(folder)
    damage = "it has no readable manifest.json" if manifest is None else damaged(folder, manifest, vocab_size)
    if damage is None:
        return Store(folder, manifest)  # type: ignore[arg-type]
    if repair:
        logger.warning("the %s store %s is damaged (%s): building it again", kind, folder, damage)
        shutil.rmtree(folder, ignore_errors=True)
    return None


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """A store folder's manifest, or None when it has none (or it is not JSON, or not this format's)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return manifest if isinstance(manifest, dict) and "tables" in manifest else None


def damaged(folder: Path, manifest: dict[str, Any], vocab_size: int | None) -> str | None:
    """What is wrong with a store's ids (against the vocabulary) or files (against their checksums), or None."""
    max_id = manifest.get("max_id")
    if vocab_size is not None and max_id is not None and max_id >= vocab_size:
        return f"its ids reach {max_id}, past the tokenizer's {vocab_size} entries"
    return checksum_damage(folder, manifest.get("checksums"), skip=(MANIFEST,))


def build_store(
    folder: Path,
    key: dict[str, Any],
    build: Build,
    id_columns: tuple[str, ...] = (),
    vocab_size: int | None = None,
    notes: Notes = dict,
) -> Store:
    """Build the tables into a hidden temporary folder beside `folder`, then rename it into place; ids of
    `id_columns` past `vocab_size` are a DataError."""
    partial = partial_folder(folder)
    start = time.monotonic()
    try:
        scratch = partial / ".scratch"
        scratch.mkdir()
        tables = build(scratch)
        extra = notes()  # a builder that counted its ids notes the largest itself
        max_id = extra.pop("max_id") if "max_id" in extra else largest_id(tables, id_columns)
        if vocab_size is not None and max_id is not None and max_id >= vocab_size:
            raise DataError(f"the tokenizer gave id {max_id}, past its own {vocab_size} entries")
        counts = {name: len(table) for name, table in tables.items()}
        for name, table in tables.items():
            save_table(table, scratch / f"{name}{ARROW}", partial / f"{name}{ARROW}")
        del tables  # they map files under scratch
        shutil.rmtree(scratch)
        manifest = {
            "key": key,
            "tables": counts,
            "max_id": max_id,
            "checksums": folder_checksums(partial),
            "built": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "build_seconds": round(time.monotonic() - start, 3),
            **extra,
        }
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        return move_into_place(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def save_table(table: Dataset, written: Path, path: Path) -> None:
    """Write a table to `path` as an Arrow stream, a record batch at a time; a table that is the builder's file
    `written` is moved there as it is."""
    import pyarrow as pa

    if [Path(f["filename"]) for f in table.cache_files] == [written]:
        os.replace(written, path)
        return
    schema = table.features.arrow_schema
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as stream:
        for batch in table.with_format("arrow").iter(batch_size=BATCH_ROWS):
            stream.write_table(batch.cast(schema))


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


def move_into_place(partial: Path, folder: Path) -> Store:
    """Rename a built folder to its name and open it; when another process got there first, use its store; a
    damaged folder in the way is removed first."""
    for attempt in range(2):
        try:
            os.rename(partial, folder)
            break
        except OSError:
            store = open_store(folder)
            if store is not None:
                logger.info("another process built %s first: using it", folder)
                return store
            if attempt:
                raise
            open_store(folder, repair=True)
    store = open_store(folder)
    assert store is not None, folder
    return store


def why_new(cache: Path, name: str, key: dict[str, Any]) -> str:
    """Which keys differ from the newest store of the same name in the cache (or that there is none)."""
    newest = _newest_manifest(cache, name)
    if newest is None:
        return f"no earlier {name} store in {cache}"
    previous = newest[1].get("key", {})
    changed = [k for k in [*key, *(k for k in previous if k not in key)] if previous.get(k) != key.get(k)]
    return f"{', '.join(changed) or 'nothing'} changed since {newest[0].name}"


def _newest_manifest(cache: Path, name: str) -> tuple[Path, dict[str, Any]] | None:
    """The newest built store named `name-*` in the cache: its folder and manifest."""
    found = []
    for manifest in cache.glob(f"{name}-*/{MANIFEST}"):
        try:
            found.append((manifest.stat().st_mtime, manifest.parent, json.loads(manifest.read_text(encoding="utf-8"))))
        except (OSError, json.JSONDecodeError):
            continue
    if not found:
        return None
    _, folder, manifest = max(found, key=lambda item: item[0])
    return folder, manifest


def wait_for_store(
    folder: Path, timeout_s: float = WAIT_S, poll_s: float = 1.0, vocab_size: int | None = None
) -> Store:
    """The store another rank is building in `folder`, once it opens; a DataError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        store = open_store(folder, vocab_size=vocab_size)
        if store is not None:
            return store
        if time.monotonic() >= deadline:
            raise DataError(
                f"no store appeared in {folder} within {timeout_s:.0f} s: the rank that builds it (global rank 0 "
                f"in prepare_data, or local rank 0 for a node-local {CACHE_OPTION}) failed or is slow; build it first "
                "with `tetraformer prepare -c CONFIG` or put --data.cache_dir on a disk every rank sees"
            )
        time.sleep(poll_s)


def writable_cache(cache_dir: str | Path | None) -> Path:
    """The cache folder, created when missing; a ConfigError naming the option when it cannot be written."""
    cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=cache):
            pass
    except OSError as err:
        raise ConfigError(
            f"{CACHE_OPTION}={str(cache)!r}: cannot write there ({err.strerror or err}); set it to a writable folder"
        ) from None
    return cache


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
