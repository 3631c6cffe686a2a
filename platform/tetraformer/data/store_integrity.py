"""What keeps a store honest on disk: content checksums written at build and verified on reuse, and the hidden
`.partial-*` folders of builds that died, removed.

A checksum is xxHash's XXH3-128 of a file's bytes (the `xxhash` package, which `datasets` uses too): about 0.3 s
per GB read from the page cache on a 2-core AMD EPYC (blake2b: 1.9 s), so a reused store costs one read of its
files. A build's folder is named `.partial-STORE@HOST-PID-RANDOM`: a later build on the same host removes it once
that process is gone (two live builds of one store never touch each other's folder); a folder from another host,
or named before this scheme, is removed once nothing in it changed for STALE_S.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import time
import uuid
from pathlib import Path

import xxhash

from tetraformer.files import process_alive

logger = logging.getLogger(__name__)

CHUNK = 1 << 23  # bytes read per hash update
PARTIAL = ".partial-"
STALE_S = 24 * 3600.0  # a partial folder whose builder cannot be asked is stale after a day without a write
_OWNER = re.compile(r"@(?P<host>[^@/]+)-(?P<pid>\d+)-[0-9a-f]+$")


def new_hash() -> xxhash.xxh3_128:
    """A running checksum to feed a file's bytes as they are written."""
    return xxhash.xxh3_128()


def file_checksum(path: Path) -> str:
    """The XXH3-128 hex digest of a file's bytes."""
    digest = new_hash()
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while n := handle.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def folder_checksums(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """The checksum of every file under `folder` (by its path relative to it, '/'-separated), except `skip`."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    named = {p.relative_to(folder).as_posix(): p for p in files}
    return {name: file_checksum(path) for name, path in named.items() if name not in skip}


def checksum_damage(folder: Path, recorded: dict[str, str] | None, skip: tuple[str, ...] = ()) -> str | None:
    """What differs between a store folder's files and the checksums its manifest recorded, or None."""
    if not recorded:
        return "its manifest records no content checksum (built before checksums were kept)"
    found = folder_checksums(folder, skip)
    for name in sorted(set(recorded) | set(found)):
        if name not in found:
            return f"{name} is missing"
        if name not in recorded:
            return f"{name} is not in its manifest"
        if found[name] != recorded[name]:
            return f"{name}'s content differs from the checksum its manifest recorded"
    return None


def partial_folder(folder: Path) -> Path:
    """A new hidden folder beside `folder` to build it in, named by this host and process."""
    partial = folder.with_name(f"{PARTIAL}{folder.name}@{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    partial.mkdir()
    return partial


def remove_stale_partials(cache: Path) -> None:
    """Remove the partial folders in `cache` whose build died (logged); live builds' folders stay."""
    for path in cache.glob(f"{PARTIAL}*"):
        if path.is_dir() and _stale(path):
            logger.info("removing %s: the build that wrote it is gone", path)
            shutil.rmtree(path, ignore_errors=True)


def _stale(path: Path) -> bool:
    """Whether no live process builds in this partial folder."""
    owner = _OWNER.search(path.name)
    if owner is not None and owner["host"] == socket.gethostname():
        return not process_alive(int(owner["pid"]))
    return time.time() - _last_write(path) > STALE_S


def _last_write(path: Path) -> float:
    """The newest modification time of a folder and everything in it."""
    times = []
    for item in [path, *path.rglob("*")]:
        try:
            times.append(item.stat().st_mtime)
        except OSError:  # removed while walking
            continue
    return max(times, default=0.0)
