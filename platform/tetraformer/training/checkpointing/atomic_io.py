"""Atomic checkpoint writes: a process killed mid-write leaves the previous checkpoint whole and loadable.

Each checkpoint is written to a temporary file beside it, flushed and fsynced, then `os.replace`d over the
old one (and the directory fsynced), so a reader sees the old file or the new one, never half of one.
The temporary name (`.partial-*.tmp`) is nothing Lightning or `--ckpt_path last` takes for a checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins import CheckpointIO, TorchCheckpointIO

from tetraformer.files import PARTIAL_PREFIX, PARTIAL_SUFFIX, atomic_write

log = logging.getLogger(__name__)


def atomic_save(obj: Any, path: str | Path) -> None:
    """torch.save `obj` to `path` atomically (tetraformer.files.atomic_write)."""
    atomic_write(path, lambda f: torch.save(obj, f))


def remove_partials(directory: Path) -> int:
    """Delete the temporary files writes killed midway left in `directory`; how many there were."""
    leftovers = list(directory.glob(f"{PARTIAL_PREFIX}*{PARTIAL_SUFFIX}"))
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)
    if leftovers:
        log.info("removed %d unfinished checkpoint write(s) from %s", len(leftovers), directory)
    return len(leftovers)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint format, written atomically to local paths (remote URLs: Lightning's writer)."""

    def __init__(self) -> None:
        self._cleaned: set[Path] = set()

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        """Write `checkpoint` to `path` atomically; the first write to a directory clears earlier runs' leftovers."""
        if storage_options is not None or "://" in str(path):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        directory = Path(path).parent
        if directory not in self._cleaned and directory.is_dir():
            remove_partials(directory)
        self._cleaned.add(directory)
        atomic_save(checkpoint, path)


def with_atomic_io(plugins: Any) -> list[Any]:
    """The trainer's plugins plus AtomicCheckpointIO, unless they already bring a CheckpointIO."""
    configured = [] if plugins is None else list(plugins) if isinstance(plugins, list | tuple) else [plugins]
    if any(isinstance(plugin, CheckpointIO) for plugin in configured):
        return configured
    return [*configured, AtomicCheckpointIO()]
