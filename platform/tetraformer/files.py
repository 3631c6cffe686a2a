"""Writing files safely (atomically, or only on change), and where Tetraformer keeps its caches."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

CACHE_ENV = "TETRAFORMER_CACHE_DIR"
PARTIAL_PREFIX, PARTIAL_SUFFIX = ".partial-", ".tmp"  # the temporary file beside the target


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], object]) -> Path:
    """Call `write` on a fsynced temporary file in `path`'s folder, then `os.replace` it over `path`.

    A reader sees the old file or the new one; each process writes its own temporary file (DDP ranks), and a
    failed write removes it. The folder is created when missing.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=PARTIAL_PREFIX, suffix=PARTIAL_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (where the platform lets a directory be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text_if_changed(path: Path, text: str) -> None:
    """Write a UTF-8 file only when its text changes, so its modification time says when the data changed."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def cache_root() -> Path:
    """The cache folder: $TETRAFORMER_CACHE_DIR, else $XDG_CACHE_HOME/tetraformer, else ~/.cache/tetraformer."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "tetraformer")
