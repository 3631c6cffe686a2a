"""A tiny classifier learns the keyword fixture on each backbone, with the same data, metrics and CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import last_metrics


@pytest.mark.learning
@pytest.mark.parametrize(
    ("backbone", "pooling"),
    [("encoder", "cls"), ("decoder", "last"), ("encoder_decoder", "mean"), ("encoder_decoder", "decoder")],
)
def test_learns_on_every_backbone(
    run_cli: Callable[..., Path], splits: dict[str, Path], backbone: str, pooling: str
) -> None:
    """Validation accuracy and macro-F1 end well above chance (1/3) on the keyword fixture."""
    run = run_cli(
        "fit",
        model={"backbone": backbone, "pooling": pooling},
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    metrics = last_metrics(run)
    assert metrics["val/acc"] > 0.8, metrics
    assert metrics["val/f1_macro"] > 0.75, metrics
