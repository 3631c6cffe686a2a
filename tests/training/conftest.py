"""Fixtures of the training tests: one uninterrupted tiny run that resumed runs must end equal to."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.training.resume_runs import fit, write_config


@pytest.fixture(scope="session")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run dir of the tiny dropout run trained to the end without stopping (read-only)."""
    root = tmp_path_factory.mktemp("uninterrupted")
    run = root / "run"
    fit(write_config(root, run))
    return run
