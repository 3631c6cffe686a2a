"""The learning-rate schedule is sized by the run's optimizer steps, and says so when they are few or unknown."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

OPTIM_LOGGER = "tetraformer.training.base.optim"


def schedule_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """The schedule's log lines at `level`."""
    return [r.getMessage() for r in caplog.records if r.name == OPTIM_LOGGER and r.levelno == level]


def test_a_run_bounded_by_time_alone_trains_without_decay(
    run_cli: Callable[..., Path], text_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No max_steps or max_epochs: the cosine cannot be sized, so the run trains at lr after warm-up, warned once."""
    caplog.set_level(logging.INFO)
    data = {"train_path": str(text_file), "documents": "line"}
    limits = ("--trainer.max_steps", "-1", "--trainer.max_time", "00:00:00:02", "--model.optim.schedule", "cosine")
    run = run_cli("fit", *limits, **data)
    [warning] = schedule_lines(caplog, logging.WARNING)
    assert "length in optimizer steps is unknown" in warning and "--trainer.max_steps" in warning
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] > 0


def test_an_epoch_sized_run_names_its_few_steps(
    run_cli: Callable[..., Path], text_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two epochs of a small file are a few optimizer steps: one INFO line says how many and what set them."""
    caplog.set_level(logging.INFO)
    data = {"train_path": str(text_file), "documents": "line"}
    run_cli("fit", "--trainer.max_steps", "-1", "--trainer.max_epochs", "2", "--model.optim.warmup_steps", "0", **data)
    [info] = schedule_lines(caplog, logging.INFO)
    assert "--trainer.max_epochs 2 x" in info and "--trainer.max_steps N sizes" in info
    assert schedule_lines(caplog, logging.WARNING) == []
