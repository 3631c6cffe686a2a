"""A fake registry of demo datasets: one that builds, one that fails midway, one that falls back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetraformer.demo_data import formats as fmt
from tetraformer.demo_data import registry
from tetraformer.demo_data import sources as src
from tetraformer.demo_data.options import Counts, Options


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Register fake datasets: 'ok' writes one file, 'broken' fails midway, 'missing' falls back to 'ok'."""
    calls: list[str] = []

    def build_ok(root: Path, opts: Options) -> Counts:
        calls.append("ok")
        return {"fake/train.txt": fmt.write_text(root / "fake" / "train.txt", "a\nb\n")}

    def build_broken(root: Path, opts: Options) -> Counts:
        calls.append("broken")
        fmt.write_text(root / "broken" / "train.txt", "half\n")
        raise src.SourceUnavailable("pip could not install nothing-here")

    def build_missing(root: Path, opts: Options) -> Counts:
        calls.append("missing")
        raise src.SourceUnavailable("apt-get not found")

    fake = {
        "ok": registry.Dataset(build_ok, ("fake",), "fake"),
        "broken": registry.Dataset(build_broken, ("broken",), "fails"),
        "missing": registry.Dataset(build_missing, ("missing",), "falls back", fallback="ok"),
    }
    monkeypatch.setattr(registry, "REGISTRY", fake)
    return calls
