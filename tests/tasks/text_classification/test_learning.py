"""A tiny classifier learns the keyword fixture on each backbone, with the same data, metrics and CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import last_metrics


@pytest.mark.parametrize(
    ("backbone", "pooling", "epochs"),
    # one decoder step reads the text only through cross-attention: it needs a few more epochs
    [("encoder", "cls", 6), ("decoder", "last", 6), ("encoder_decoder", "mean", 6), ("encoder_decoder", "decoder", 12)],
)
def test_learns_on_every_backbone(
    run_cli: Callable[..., Path], splits: dict[str, Path], backbone: str, pooling: str, epochs: int
) -> None:
    """Validation accuracy and macro-F1 end well above chance (1/3) on the keyword fixture."""
    run = run_cli("fit", "--trainer.max_epochs", str(epochs), model={"backbone": backbone, "pooling": pooling},
                  train_path=str(splits["train"]), val_path=str(splits["val"]))  # fmt: skip
    metrics = last_metrics(run)
    assert metrics["val/acc"] > 0.8, metrics
    assert metrics["val/f1_macro"] > 0.75, metrics
