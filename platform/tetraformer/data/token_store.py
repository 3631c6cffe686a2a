"""A token store: one flat array of token ids on disk, memory-mapped when read, built once per key.

A store is a folder `CACHE_DIR/NAME-HASH/` holding `tokens.bin` (the ids, uint16 when the vocabulary has at most
65536 entries, else uint32), `doc_ends.bin` (int64: the offset after each document's last token) and
`manifest.json` (the key, dtype and counts). HASH is a digest of the key: whatever changes the tokens (the source
files' identity, the tokenizer's content, the reading options), never how they are cut into batches. It is built
in a hidden temporary folder and renamed into place when complete, so a build killed half-way leaves nothing that
is reused (its folder is removed by a later build, data/store_integrity.py). The manifest records each file's
content checksum and the largest id: a store whose files differ from their checksums, whose ids pass the
tokenizer's vocabulary or that has no manifest is removed and built again, with one warning.

Nanogpt's `prepare.py` writes such a uint16 memory map too; `datasets.map` caches Arrow tables, which holds
variable-length rows with offsets that LM blocks, cut across documents, do not need.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from tetraformer.data.errors import DataError
from tetraformer.data.store_integrity import (
    checksum_damage,
    new_hash,
    partial_folder,
    remove_stale_partials,
)
from tetraformer.errors import ConfigError
from tetraformer.files import cache_root

logger = logging.getLogger(__name__)

STORE_FORMAT = 1  # bump when the files' layout changes: older stores are then not reused
TOKENS, DOC_ENDS, MANIFEST = "tokens.bin", "doc_ends.bin", "manifest.json"
CACHE_OPTION = "--data.cache_dir"
WAIT_S = 3600.0  # how long a rank waits for the rank that builds a store


def default_cache_dir() -> Path:
    """Where stores go unless --data.cache_dir says: `token_stores/` in Tetraformer's cache folder."""
    return cache_root() / "token_stores"


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype holding ids 0 .. vocab_size - 1."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def key_digest(key: dict[str, Any]) -> str:
    """A short, stable hash of a store key."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TokenStore:
    """A built store: its folder and manifest; `tokens()` maps the ids read-only."""

    path: Path
    manifest: dict[str, Any]

    @property
    def n_tokens(self) -> int:
        """How many ids the store holds."""
        return int(self.manifest["n_tokens"])

    @property
    def dtype(self) -> np.dtype:
        """The ids' dtype (uint16 or uint32)."""
        return np.dtype(self.manifest["dtype"])

    @property
    def size_bytes(self) -> int:
        """The store's files' size on disk."""
        return sum(f.stat().st_size for f in self.path.iterdir())

    def summary(self) -> str:
        """'12.3 MB, 4,567,890 uint16 tokens' (what `tetraformer prepare` prints)."""
        return f"{self.size_bytes / 1e6:.1f} MB, {self.n_tokens:,} {self.dtype.name} tokens"

    def tokens(self) -> np.ndarray:
        """The ids as a read-only memory map (an empty array for an empty store)."""
        if self.n_tokens == 0:
            return np.zeros(0, self.dtype)
        return np.memmap(self.path / TOKENS, dtype=self.dtype, mode="r", shape=(self.n_tokens,))

    def doc_ends(self) -> np.ndarray:
        """The offset after each document's last token (int64, memory-mapped)."""
        n_docs = int(self.manifest["n_documents"])
        if n_docs == 0:
            return np.zeros(0, np.int64)
        return np.memmap(self.path / DOC_ENDS, dtype=np.int64, mode="r", shape=(n_docs,))


class StoreWriter:
    """Appends ids and document ends to a store's files as they are produced (nothing held in memory)."""

    def __init__(self, folder: Path, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.n_tokens = self.n_documents = 0
        self.max_id: int | None = None  # the largest id written
        self._tokens: IO[bytes] = open(folder / TOKENS, "wb")  # noqa: SIM115 - closed by close()
        self._ends: IO[bytes] = open(folder / DOC_ENDS, "wb")  # noqa: SIM115
        self._hashes = {TOKENS: new_hash(), DOC_ENDS: new_hash()}

    def write(self, ids: np.ndarray, doc_ends: np.ndarray) -> None:
        """Append ids (of the store's dtype) and the ends of the documents they complete (offsets within `ids`)."""
        ends = np.ascontiguousarray(np.asarray(doc_ends, np.int64) + self.n_tokens)
        ids = np.ascontiguousarray(np.asarray(ids, self.dtype))
        for name, handle, values in ((DOC_ENDS, self._ends, ends), (TOKENS, self._tokens, ids)):
            self._hashes[name].update(values)
            values.tofile(handle)
        if len(ids):
            self.max_id = max(self.max_id or 0, int(ids.max()))
        self.n_tokens += len(ids)
        self.n_documents += len(doc_ends)

    def checksums(self) -> dict[str, str]:
        """The content checksum of each file written."""
        return {name: digest.hexdigest() for name, digest in self._hashes.items()}

    def close(self) -> None:
        """Flush the files to disk and close them."""
        for handle in (self._tokens, self._ends):
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()


Build = Callable[[StoreWriter], dict[str, Any]]  # writes the ids; returns extra manifest entries


def prepare_store(
    cache_dir: str | Path | None, name: str, key: dict[str, Any], vocab_size: int, build: Build
) -> TokenStore:
    """The store of `key` (ids below `vocab_size`) under `cache_dir`: reused when it is there and whole, else
    built now (logging why)."""
    folder = store_folder(cache_dir, name, key)
    remove_stale_partials(folder.parent)
    store = open_store(folder, repair=True, vocab_size=vocab_size)
    if store is not None:
        logger.info("reusing the token store %s (%s tokens)", folder, f"{store.n_tokens:,}")
        return store
    logger.info("building the token store %s: %s", folder, why_new(folder.parent, name, key))
    return build_store(folder, key, vocab_size, build)


def store_folder(cache_dir: str | Path | None, name: str, key: dict[str, Any]) -> Path:
    """The folder of `key`'s store in the (writable) cache folder."""
    return writable_cache(cache_dir) / f"{name}-{key_digest(key)}"


def open_store(folder: Path, repair: bool = False, vocab_size: int | None = None) -> TokenStore | None:
    """The store in `folder` (its ids below `vocab_size` when given), or None when it is not built; a damaged one
    is removed when `repair` (one warning)."""
    if not folder.is_dir():
        return None
    manifest = read_manifest(folder)
    store = TokenStore(folder, manifest) if manifest is not None else None
    damage = "it has no readable manifest.json" if store is None else damaged(store, vocab_size)
    if damage is None:
        return store
    if repair:
        remove_damaged(folder, "token", damage)
    return None


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """A store folder's manifest, or None when it has none (or it is not JSON)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return manifest if isinstance(manifest, dict) else None


def remove_damaged(folder: Path, kind: str, damage: str) -> None:
    """Remove a damaged store folder, saying why in one warning."""
    logger.warning("the %s store %s is damaged (%s): building it again", kind, folder, damage)
    shutil.rmtree(folder, ignore_errors=True)


def damaged(store: TokenStore, vocab_size: int | None = None) -> str | None:
    """What is wrong with a store's files compared with its manifest (sizes, then content checksums), or with its
    ids against a vocabulary of `vocab_size`; None when nothing is."""
    expected = {TOKENS: store.n_tokens * store.dtype.itemsize, DOC_ENDS: int(store.manifest["n_documents"]) * 8}
    for name, size in expected.items():
        path = store.path / name
        found = path.stat().st_size if path.is_file() else None
        if found != size:
            return f"{name} has {'no file' if found is None else f'{found} bytes'}, its manifest says {size} bytes"
    max_id = store.manifest.get("max_id")
    if vocab_size is not None and max_id is not None and max_id >= vocab_size:
        return f"its ids reach {max_id}, past the tokenizer's {vocab_size} entries"
    return checksum_damage(store.path, store.manifest.get("checksums"), skip=(MANIFEST,))


def build_store(folder: Path, key: dict[str, Any], vocab_size: int, build: Build) -> TokenStore:
    """Build into a hidden temporary folder beside `folder`, then rename it into place (atomically); ids past
    `vocab_size` are a DataError."""
    partial = partial_folder(folder)
    try:
        writer = StoreWriter(partial, token_dtype(vocab_size))
        try:
            extra = build(writer)
        finally:
            writer.close()
        if writer.max_id is not None and writer.max_id >= vocab_size:
            raise DataError(f"the tokenizer gave id {writer.max_id}, past its own {vocab_size} entries")
        manifest = {
            "key": key,
            "dtype": writer.dtype.name,
            "n_tokens": writer.n_tokens,
            "n_documents": writer.n_documents,
            "max_id": writer.max_id,
            "checksums": writer.checksums(),
            "built": time.strftime("%Y-%m-%dT%H:%M:%S"),
            **extra,
        }
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        return move_into_place(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def move_into_place(partial: Path, folder: Path, opener: Callable[[Path], Any] | None = None) -> Any:
    """Rename a built folder to its name and open it (`opener`, a token store's by default); when another process
    got there first, use its store; a damaged folder in the way is removed first."""
    opener = opener or open_store
    for attempt in range(2):
        try:
            os.rename(partial, folder)
            break
        except OSError:
            store = opener(folder)
            if store is not None:
                logger.info("another process built %s first: using it", folder)
                return store
            if attempt:
                raise
            opener(folder, repair=True)
    store = opener(folder)
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
    folder: Path, timeout_s: float = WAIT_S, poll_s: float = 1.0, opener: Callable[[Path], Any] | None = None
) -> Any:
    """The store another rank is building in `folder`, once `opener` (a token store's by default) opens it; a
    DataError after `timeout_s`."""
    opener = opener or open_store
    deadline = time.monotonic() + timeout_s
    while True:
        store = opener(folder)
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
