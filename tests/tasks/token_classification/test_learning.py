"""A tiny tagger learns the tagging fixture through the CLI: entity F1 well above chance, test report written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import last_metrics


@pytest.mark.learning
@pytest.mark.parametrize(("backbone", "crf"), [("encoder", False), ("decoder", False), ("encoder", True)])
def test_learns_tagging_fixture(
    run_cli: Callable[..., Path], splits: dict[str, Path], backbone: str, crf: bool
) -> None:
    """Validation entity F1 and token accuracy end high (also with a CRF over the tags)."""
    model = {"backbone": backbone, "crf": crf}
    run = run_cli("fit", model=model, train_path=str(splits["train"]), val_path=str(splits["val"]))
    metrics = last_metrics(run)
    assert metrics["val/entity_f1"] > 0.85, metrics
    assert metrics["val/token_acc"] > 0.9, metrics
