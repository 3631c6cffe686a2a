"""A real entry in a private Hugging Face datasets cache, made the way `datasets` makes one, offline."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest


def cache_entry(
    splits: dict[str, datasets.Dataset], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Write the splits as the Hub lays out Parquet shards (NAME/data/SPLIT-00000-of-00001.parquet) and load the
    folder once into a cache under tmp_path, as loading NAME from the Hub would; HF_DATASETS_CACHE points there."""
    source = tmp_path / "hub" / name
    (source / "data").mkdir(parents=True)
    for split, dataset in splits.items():
        dataset.to_parquet(str(source / "data" / f"{split}-00000-of-00001.parquet"))
    cache = tmp_path / "hf_datasets"
    datasets.load_dataset(str(source), cache_dir=str(cache))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    return cache
