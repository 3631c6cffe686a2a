"""default_callbacks: what a run gets when training, evaluating, training without checkpoints, and without a bar."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import Checkpoint, LearningRateMonitor

from tetraformer.training.callbacks.defaults import default_callbacks
from tetraformer.training.callbacks.progress_lines import ProgressLines
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


def test_progress_lines_come_when_training_without_a_bar(tmp_path: Path) -> None:
    """Log lines replace the bar in a fit whose output is no terminal; never beside a bar, in evaluation, or off."""
    assert ProgressLines in kinds(default_callbacks(tmp_path, RunConfig(), progress_bar=False))
    assert ProgressLines not in kinds(default_callbacks(tmp_path, RunConfig(), progress_bar=True))
    assert ProgressLines not in kinds(default_callbacks(tmp_path, RunConfig(), training=False))
    off = RunConfig(progress_every_n_steps=0, progress_every_s=None)
    assert ProgressLines not in kinds(default_callbacks(tmp_path, off))


def test_progress_lines_read_the_run_token_counter(tmp_path: Path) -> None:
    """They come after Throughput (its counts are theirs) and share it, so rates and budgets agree."""
    callbacks = default_callbacks(tmp_path, RunConfig())
    (throughput,) = (i for i, c in enumerate(callbacks) if isinstance(c, Throughput))
    (lines,) = (i for i, c in enumerate(callbacks) if isinstance(c, ProgressLines))
    assert throughput < lines and callbacks[lines].counter is callbacks[throughput]
