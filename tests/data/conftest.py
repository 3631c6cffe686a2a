"""Fixtures for data tests: files written under tmp_path, and a private datasets cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import datasets
import pytest


@pytest.fixture(autouse=True)
def _private_datasets_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep Dataset.from_generator caches out of ~/.cache."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.mktemp("hf_cache")))


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """Write text (utf-8) or bytes to tmp_path/name, creating folders; returns the path."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return _write
