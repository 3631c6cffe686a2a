"""default_callbacks: what a run gets when training, evaluating, and training without checkpoints."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import Checkpoint, LearningRateMonitor

from tetraformer.training.callbacks.defaults import default_callbacks
from tetraformer.training.callbacks.throughput import Throughput
from tetraformer.training.reports.loggers import RunConfig


def kinds(callbacks: list) -> set[type]:
    return {type(c) for c in callbacks}


def test_training_without_checkpoints_keeps_throughput_and_the_lr_monitor(tmp_path: Path) -> None:
    """`--trainer.enable_checkpointing false` drops only what writes checkpoints (Lightning refuses those)."""
    full = default_callbacks(tmp_path, RunConfig())
    bare = default_callbacks(tmp_path, RunConfig(), checkpoints=False)
    assert any(isinstance(c, Checkpoint) for c in full)
    assert not any(isinstance(c, Checkpoint) for c in bare)
    assert {Throughput, LearningRateMonitor} <= kinds(bare)
    assert len(bare) < len(full)


def test_evaluation_gets_no_training_callbacks(tmp_path: Path) -> None:
    """validate/test/predict: no checkpoints, no non-finite guard, but throughput and the LR monitor."""
    callbacks = default_callbacks(tmp_path, RunConfig(), training=False)
    assert not any(isinstance(c, Checkpoint) for c in callbacks)
    assert {Throughput, LearningRateMonitor} <= kinds(callbacks)
