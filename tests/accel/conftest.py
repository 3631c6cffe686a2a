"""accel tests run tiny layers on one thread, with a fake timer wherever a test names the faster candidate."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.accel.fakes import pretend_exact
from tests.threads import single_thread
from tetraformer.accel import chooser

__all__ = ["single_thread", "prefer"]


@pytest.fixture
def prefer(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Callable[[str], list[str]]:
    """prefer(*names): the measured-choice chooser finds the candidates called `names` fastest everywhere (a fake
    timer, nothing timed, every candidate taken as exact); returns the list of keys it was asked to time."""

    def install(*names: str) -> list[str]:
        keys: list[str] = []

        def timer(key: str, candidate: str, call: object, best: float) -> float:
            keys.append(key)
            return 1e-3 if candidate in names else 5e-3

        picker = chooser.LayoutChooser(timer, tmp_path / "layouts.json", exact=pretend_exact)
        monkeypatch.setattr(chooser, "CHOOSER", picker)
        return keys

    return install
