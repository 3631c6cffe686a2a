"""Callbacks every task gets: checkpoints, LR monitor, progress bar, throughput, samples table, predictions."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import (
    BasePredictionWriter,
    Callback,
    EarlyStopping,
    LearningRateMonitor,
    ModelCheckpoint,
    RichProgressBar,
)

from tetraformer.core.accounting import flops_per_token
from tetraformer.training.loggers import RunConfig, wandb_logger


class Throughput(Callback):
    """Logs train/tokens_per_s over each logging interval, and train/mfu when the device peak is known."""

    def __init__(self, peak_tflops: float | None = None) -> None:
        self.peak_flops = peak_tflops * 1e12 if peak_tflops else None
        self.tokens, self.start = 0, None
        self.flops_per_token = 0.0

    def setup(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        """Count the model's training FLOPs per token once, on the built model before any sharding."""
        if self.peak_flops and stage == "fit":
            self.flops_per_token = flops_per_token(pl_module.net, pl_module.net.cfg.max_len)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Start the clock on the first batch of an interval."""
        if self.start is None:
            self.start = time.perf_counter()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Count this batch's tokens; log the rate at each logging step."""
        self.tokens += pl_module.batch_tokens(batch) * trainer.world_size
        if trainer.global_step % max(trainer.log_every_n_steps, 1) == 0 and self.start is not None:
            elapsed = time.perf_counter() - self.start
            if elapsed > 0 and self.tokens:
                rate = self.tokens / elapsed
                pl_module.log("train/tokens_per_s", rate, on_step=True, on_epoch=False)
                if self.peak_flops:
                    flops = rate * self.flops_per_token / trainer.world_size
                    pl_module.log("train/mfu", flops / self.peak_flops, on_step=True, on_epoch=False)
            self.tokens, self.start = 0, None


class SamplesTable(Callback):
    """Logs the task's qualitative samples (e.g. generated text) as a W&B table at each validation."""

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Ask the module for (columns, rows) and log them on rank zero."""
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        table = pl_module.sample_table()
        logger = wandb_logger(trainer.loggers)
        if table is not None and logger is not None:
            columns, rows = table
            logger.log_text(
                key="val/samples", columns=["step", *columns], data=[[trainer.global_step, *r] for r in rows]
            )


class FinalCheckpoint(Callback):
    """Writes last.ckpt when training ends, so a run stopped between validations resumes where it stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Save on every rank's call (rank zero writes)."""
        if trainer.global_step > 0 and not trainer.fast_dev_run:
            trainer.save_checkpoint(self.path)


class JsonlPredictionWriter(BasePredictionWriter):
    """Writes each predicted record (a dict) as one JSON line."""

    def __init__(self, output: str | Path) -> None:
        super().__init__(write_interval="batch")
        self.output = Path(output)

    def setup(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        """Start a fresh output file."""
        if stage == "predict" and trainer.is_global_zero:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            self.output.write_text("")

    def write_on_batch_end(self, trainer: L.Trainer, pl_module: Any, prediction: Any, *args: Any) -> None:
        """Append this batch's records."""
        with self.output.open("a", encoding="utf-8") as f:
            for record in prediction:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")


def default_callbacks(root_dir: str | Path, run: RunConfig) -> list[Callback]:
    """Best + last checkpoints, LR monitor, progress bar, throughput, samples and optional early stopping."""
    checkpoint = ModelCheckpoint(
        dirpath=Path(root_dir) / "checkpoints", filename="best", monitor=run.monitor, mode=run.monitor_mode,
        save_last=True, save_top_k=1, auto_insert_metric_name=False,
    )  # fmt: skip
    final = FinalCheckpoint(Path(root_dir) / "checkpoints" / "last.ckpt")
    callbacks: list[Callback] = [checkpoint, final, LearningRateMonitor("step"), Throughput(run.peak_tflops)]
    if run.samples:
        callbacks.append(SamplesTable())
    if run.early_stopping_patience is not None:
        callbacks.append(
            EarlyStopping(run.monitor, patience=run.early_stopping_patience, mode=run.monitor_mode)
        )
    if sys.stdout.isatty():  # rich bars are noise in logs and CI
        callbacks.append(RichProgressBar())
    return callbacks
