"""A tiny tagger (or an ensemble of two) learns the tagging fixture through the CLI: entity F1 well above chance."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import last_metrics


@pytest.mark.learning
@pytest.mark.parametrize(
    ("backbone", "crf", "ensemble"),
    [("encoder", False, 1), ("decoder", False, 1), ("encoder", True, 1), ("encoder", True, 2)],
)
def test_learns_tagging_fixture(
    run_cli: Callable[..., Path], splits: dict[str, Path], backbone: str, crf: bool, ensemble: int
) -> None:
    """Validation entity F1 and token accuracy end high (also with a CRF over the tags, and for an ensemble)."""
    model = {"backbone": backbone, "crf": crf, "ensemble": ensemble}
    run = run_cli("fit", model=model, train_path=str(splits["train"]), val_path=str(splits["val"]))
    metrics = last_metrics(run)
    assert metrics["val/entity_f1"] > 0.85, metrics
    assert metrics["val/token_acc"] > 0.9, metrics
