"""last.ckpt between validations: `--run.save_every_n_steps N` / `--run.save_every_minutes M` bound the work a
crash loses to N steps or M minutes (validations write last.ckpt too)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from tetraformer.training.callbacks.step_boundary import StepBoundary

log = logging.getLogger(__name__)


class PeriodicCheckpoint(Callback):
    """Writes the run's last.ckpt after every `every_n_steps`-th optimizer step and/or once `every_minutes` have
    passed since last.ckpt was written (by this callback or a validation), always at a step boundary.

    Home-made because Lightning's `ModelCheckpoint(every_n_train_steps=..., train_time_interval=..., save_last=True)`
    breaks two promises of `--run.save_every_minutes`: its clock restarts only at its own timed saves, not at a
    validation's write of last.ckpt (README: "once M minutes passed since the last write"); and it checks the time
    after every micro-batch, so under gradient accumulation it can save in the middle of an optimizer step, whose
    accumulated gradients the checkpoint lacks, so `fit --ckpt_path last` could not continue exactly. It would
    also write last.ckpt a second time on the step a fit stops on, which `RunCheckpoint` already saves.
    """

    def __init__(
        self,
        every_n_steps: int | None = None,
        every_minutes: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError(f"--run.save_every_n_steps must be >= 1, got {every_n_steps}")
        if every_minutes is not None and every_minutes <= 0:
            raise ValueError(f"--run.save_every_minutes must be > 0, got {every_minutes}")
        self.every_n_steps, self.every_minutes, self.clock = every_n_steps, every_minutes, clock
        self._saved_at = 0.0
        self._boundary = StepBoundary()

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Start the clock."""
        self._saved_at = self.clock()

    def on_validation_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """A validation wrote last.ckpt: restart the clock."""
        if not trainer.sanity_checking:
            self._saved_at = self.clock()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Save last.ckpt when a period ended with this step (not on the step a fit stops on: that one is saved)."""
        if not self._boundary.crossed(trainer):
            return  # accumulating gradients: not a step boundary
        if not self._due(trainer) or trainer.should_stop or 0 < trainer.max_steps <= trainer.global_step:
            return
        trainer.save_checkpoint(last_checkpoint_path(trainer), weights_only=False)  # the full training state
        self._saved_at = self.clock()

    def _due(self, trainer: L.Trainer) -> bool:
        """Whether a period ended (the minutes as rank zero's clock tells them, so every rank saves together)."""
        if self.every_n_steps and trainer.global_step % self.every_n_steps == 0:
            return True
        if not self.every_minutes:
            return False
        late = self.clock() - self._saved_at >= 60 * self.every_minutes
        return bool(trainer.strategy.broadcast(late, src=0)) if trainer.world_size > 1 else late


def last_checkpoint_path(trainer: L.Trainer) -> Path:
    """The last.ckpt of the run's checkpoint callback."""
    callback = trainer.checkpoint_callback
    if not isinstance(callback, ModelCheckpoint) or callback.dirpath is None:
        raise RuntimeError("periodic checkpoints need the run's checkpoint callback (trainer.enable_checkpointing)")
    return last_ckpt(callback)


def last_ckpt(callback: ModelCheckpoint) -> Path:
    """Where a checkpoint callback writes last.ckpt (its directory, Lightning's name for the last checkpoint)."""
    return Path(callback.dirpath) / f"{callback.CHECKPOINT_NAME_LAST}{callback.FILE_EXTENSION}"
