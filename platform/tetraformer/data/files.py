"""Resolve a user's data-file spec (file, directory, glob, saved dataset, or a list of them) to files."""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from tetraformer.data.errors import DataError
from tetraformer.data.hf_sources import is_dataset_source, source_files

logger = logging.getLogger(__name__)

FileSpec = str | Path | Sequence[str | Path]

_GLOB_CHARS = frozenset("*?[")


def resolve_files(spec: FileSpec, suffixes: Iterable[str] | None = None) -> list[Path]:
    """Expand files, directories (recursively, sorted) and globs into a list of non-empty files; a saved dataset
    (`save_to_disk` folder, `PATH:SPLIT`, `hf:NAME`) into the Arrow files behind it (data/hf_sources.py)."""
    items = [spec] if isinstance(spec, str | Path) else list(spec)
    if not items:
        raise DataError("no data files given")
    wanted = _normalise_suffixes(suffixes)
    files: list[Path] = []
    for item in items:
        files.extend(_resolve_one(item, wanted))
    files = list(dict.fromkeys(files))
    for path in files:
        if path.stat().st_size == 0:
            raise DataError("file is empty", path)
    logger.debug("resolved %s to %d file(s)", spec, len(files))
    return files


def _normalise_suffixes(suffixes: Iterable[str] | None) -> tuple[str, ...] | None:
    """Lower-case suffixes with a leading dot: ("txt", ".JSONL") -> (".txt", ".jsonl")."""
    if suffixes is None:
        return None
    if isinstance(suffixes, str):
        suffixes = [suffixes]
    return tuple(s.lower() if s.startswith(".") else f".{s.lower()}" for s in suffixes)


def _resolve_one(item: str | Path, wanted: tuple[str, ...] | None) -> list[Path]:
    """Files for one spec item; an explicitly named file is kept whatever its suffix."""
    if is_dataset_source(item):
        return source_files(item)
    path = Path(item).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        return _directory_files(path, wanted)
    if _GLOB_CHARS.intersection(str(item)):
        return _glob_files(str(item), wanted)
    raise DataError("no such file or directory", path)


def _directory_files(directory: Path, wanted: tuple[str, ...] | None) -> list[Path]:
    """A directory's files, recursively and sorted, skipping hidden ones (.git, .DS_Store)."""
    files = sorted(
        path
        for path in directory.rglob("*")
        if path.is_file() and not _is_hidden(path.relative_to(directory)) and _has_suffix(path, wanted)
    )
    if not files:
        raise DataError(f"directory has no data files{_suffix_note(wanted)}", directory)
    return files


def _glob_files(pattern: str, wanted: tuple[str, ...] | None) -> list[Path]:
    """Files matched by a glob (`**` recurses); matched directories contribute their files."""
    files: list[Path] = []
    for match in sorted(glob.glob(os.path.expanduser(pattern), recursive=True)):
        path = Path(match)
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*")) if p.is_file() and _has_suffix(p, wanted))
        elif path.is_file() and _has_suffix(path, wanted):
            files.append(path)
    if not files:
        raise DataError(f"glob matched no files{_suffix_note(wanted)}", pattern)
    return files


def _is_hidden(relative: Path) -> bool:
    """True when any part of a relative path starts with a dot."""
    return any(part.startswith(".") for part in relative.parts)


def _has_suffix(path: Path, wanted: tuple[str, ...] | None) -> bool:
    """True when no filter is set or the file name ends with one of the wanted suffixes."""
    return wanted is None or path.name.lower().endswith(wanted)


def _suffix_note(wanted: tuple[str, ...] | None) -> str:
    """Explain the suffix filter in a 'nothing matched' message."""
    return "" if wanted is None else f" with suffix {', '.join(wanted)}"


def file_identities(paths: Iterable[Path]) -> list[list[str | int]]:
    """[path, size, mtime_ns] of each file (of each file inside a folder): what a store keyed by its sources checks."""
    files = [f for p in paths for f in (sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p])]
    return [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files]
