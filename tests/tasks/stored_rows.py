"""What the text tasks' row-store tests share: every batch of a datamodule, batch equality, the store's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

SPLITS = ("train", "val", "test", "predict")


def all_batches(data: Any, *stages: str) -> dict[str, list[dict]]:
    """Every batch of every split the stages set up (training ones in their shuffled order)."""
    for stage in stages:
        data.setup(stage)
    return {split: list(getattr(data, f"{split}_dataloader")()) for split in SPLITS if split in data.datasets}


def assert_same_batches(first: dict[str, list[dict]], second: dict[str, list[dict]]) -> None:
    """The same splits, batches, keys and values."""
    assert list(first) == list(second)
    for split in first:
        assert len(first[split]) == len(second[split]), split
        for a, b in zip(first[split], second[split], strict=True):
            assert list(a) == list(b), split
            for key in a:
                same = torch.equal(a[key], b[key]) if isinstance(a[key], torch.Tensor) else a[key] == b[key]
                assert same, (split, key)


def stamps(cache: Path) -> dict[Path, int]:
    """Every file and folder under the cache with its modification time (a reused store is left untouched)."""
    return {p: p.stat().st_mtime_ns for p in cache.rglob("*")}


def store_names(cache: Path) -> list[str]:
    """The names of the stores in the cache, without their key digests, sorted."""
    return sorted(p.name.rsplit("-", 1)[0] for p in cache.iterdir() if not p.name.startswith("."))


def refuse(*args: Any, **kwargs: Any) -> Any:
    """Stands in for tokenization that must not happen."""
    raise AssertionError("tokenized again instead of reusing the store")
