"""Kept snapshots: `--run.keep_every_n_steps N` writes checkpoints/step-N.ckpt, step-2N.ckpt, ... and never
overwrites them, so a pretraining run leaves one checkpoint per budget to fine-tune from (`--model.init_from`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from tetraformer.training.callbacks.step_boundary import StepBoundary


class StepSnapshots(Callback):
    """Saves the weights, model config and tokenizer (not the optimizer) after every `every_n_steps`-th step."""

    def __init__(self, directory: Path, every_n_steps: int) -> None:
        if every_n_steps < 1:
            raise ValueError(f"--run.keep_every_n_steps must be >= 1, got {every_n_steps}")
        self.directory, self.every_n_steps = Path(directory), every_n_steps
        self._boundary = StepBoundary()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Keep step-N.ckpt when this batch ended an optimizer step that is a multiple of N."""
        step = trainer.global_step
        if self._boundary.crossed(trainer) and step > 0 and step % self.every_n_steps == 0:
            trainer.save_checkpoint(snapshot_path(self.directory, step), weights_only=True)


def snapshot_path(directory: Path, step: int) -> Path:
    """checkpoints/step-<step>.ckpt."""
    return Path(directory) / f"step-{step}.ckpt"
