"""tetraformer.demo_data.registry: a dataset is built staged, skipped when there, and falls back without its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetraformer.demo_data import registry
from tetraformer.demo_data import sources as src
from tetraformer.demo_data.options import Options


def test_prepare_skips_existing_outputs_unless_forced(tmp_path: Path, fake_registry: list[str]) -> None:
    """A second run is a no-op; --force rebuilds."""
    opts = Options()
    assert registry.prepare("ok", tmp_path, opts) == {"fake/train.txt": 2}
    assert registry.prepare("ok", tmp_path, opts) is None
    assert registry.prepare("ok", tmp_path, opts, force=True) == {"fake/train.txt": 2}
    assert fake_registry == ["ok", "ok"]
    assert (tmp_path / "fake" / "train.txt").read_text() == "a\nb\n"


def test_failed_build_leaves_nothing_behind(tmp_path: Path, fake_registry: list[str]) -> None:
    """Outputs are staged, so a builder that fails midway leaves no partial folder or staging dir."""
    with pytest.raises(src.SourceUnavailable):
        registry.prepare("broken", tmp_path, Options())
    assert list(tmp_path.iterdir()) == []


def test_unavailable_source_uses_the_fallback(tmp_path: Path, fake_registry: list[str]) -> None:
    """A dataset with a fallback builds that instead when its source is missing."""
    assert registry.prepare("missing", tmp_path, Options()) == {"fake/train.txt": 2}
    assert fake_registry == ["missing", "ok"]
