"""Callbacks every task gets: checkpoints, LR monitor, progress bar or lines, throughput, samples table, predictions."""

from __future__ import annotations

import json
import logging
import sys
from datetime import timedelta
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
    Timer,
)

from tetraformer.errors import TetraformerError
from tetraformer.training.base.text_generation import GenerativeTask
from tetraformer.training.callbacks.numerics import NonFiniteGuard
from tetraformer.training.callbacks.progress_lines import ProgressLines
from tetraformer.training.callbacks.throughput import Throughput
from tetraformer.training.callbacks.token_budget import TokenBudget
from tetraformer.training.callbacks.unstarted import DiscardUnstartedLogs
from tetraformer.training.checkpointing.logging_step import LoggingStep
from tetraformer.training.checkpointing.periodic import PeriodicCheckpoint, last_ckpt
from tetraformer.training.checkpointing.preemption import Preemption
from tetraformer.training.checkpointing.resume import DataPosition, RandomState
from tetraformer.training.checkpointing.snapshots import StepSnapshots
from tetraformer.training.distributed.strategies import forward_needs_every_rank, gathered_weights
from tetraformer.training.reports.loggers import RunConfig, wandb_logger

log = logging.getLogger(__name__)


class SamplesTable(Callback):
    """Logs a generative task's continuations of its sample prompts as a W&B table at each validation."""

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Generate on rank zero (on every rank when FSDP shards the weights: each forward gathers them from all),
        when the task generates text and W&B logs the run; rank zero logs."""
        sharded = forward_needs_every_rank(trainer)
        if (
            trainer.sanity_checking
            or not (trainer.is_global_zero or sharded)
            or not isinstance(pl_module, GenerativeTask)
        ):
            return
        logger = wandb_logger(trainer.loggers)
        if logger is None or not pl_module.sample_prompts:
            return
        with gathered_weights(trainer):
            outputs = pl_module.generate(pl_module.sample_prompts)
        rows = [[trainer.global_step, p, o] for p, o in zip(pl_module.sample_prompts, outputs, strict=True)]
        if trainer.is_global_zero:
            logger.log_text(key="val/samples", columns=["step", "prompt", "generated"], data=rows)


class RunCheckpoint(ModelCheckpoint):
    """RUN_DIR/checkpoints/best.ckpt and last.ckpt, overwritten in place (no `last-v1.ckpt` on a re-run).

    last.ckpt is also written at the step training stops on (max_steps, max_time), so a resume continues
    that epoch at the next step; best.ckpt is the last state when training stopped before any validation.
    """

    def __init__(self, dirpath: Path, run: RunConfig) -> None:
        super().__init__(
            dirpath=dirpath,
            filename="best",
            monitor=run.monitor,
            mode=run.monitor_mode,
            save_last=True,
            save_top_k=1,
            auto_insert_metric_name=False,
            enable_version_counter=False,
        )
        self._final_step = -1

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Save last.ckpt on the step training stops on (before the loops count the batch as done)."""
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if trainer.should_stop or 0 < trainer.max_steps <= trainer.global_step:
            self._save_final(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Save last.ckpt when training ended after the last save (end of the last epoch, early stop); say so when
        no validation picked best.ckpt (only now: a validation may follow the step training stops on)."""
        # ModelCheckpoint keeps the step of its last save only in this private attribute: no public API has it
        if trainer.global_step > max(self._last_global_step_saved, self._final_step):
            self._save_final(trainer)
        if self._final_step > 0 and not self.best_model_path and trainer.is_global_zero:
            best = Path(self.dirpath) / f"best{self.FILE_EXTENSION}"
            log.info("no validation ran before training stopped: %s holds the last state", best)

    def _save_final(self, trainer: L.Trainer) -> None:
        """last.ckpt, and best.ckpt too when no validation has picked one (a validation may still follow)."""
        if trainer.global_step == 0 or trainer.sanity_checking:
            return
        self._final_step = trainer.global_step
        trainer.save_checkpoint(last_ckpt(self), weights_only=False)  # the full state, said so Lightning logs nothing
        if not self.best_model_path:  # a validation after this step replaces it (on_train_end says if none did)
            trainer.save_checkpoint(Path(self.dirpath) / f"best{self.FILE_EXTENSION}", weights_only=False)


class TimeBudget(Callback):
    """Refuses in one line a (resumed) run whose --trainer.max_time is spent, instead of ending with no step."""

    def on_fit_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Lightning's Timer counts the time of the runs a checkpoint continues: say so when none is left."""
        timer = next((cb for cb in trainer.callbacks if isinstance(cb, Timer)), None)
        remaining = timer.time_remaining() if timer is not None else None
        if remaining is None or remaining > 0:
            return
        spent = timer.time_elapsed()
        raise TetraformerError(
            f"this run already trained for {timedelta(seconds=round(spent))} of --trainer.max_time "
            f"{timedelta(seconds=round(spent + remaining))} (the total over resumes): raise --trainer.max_time "
            "(DD:HH:MM:SS) to train on"
        )


class FinalValidation(Callback):
    """Validates on the step `--trainer.max_steps` ends on, so the final weights always have a validation score.

    Lightning validates only every `val_check_interval`; a budget ending between two would leave the last
    steps unjudged (and best.ckpt blind to them). Asking to stop at that step makes Lightning validate first.
    """

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Stop (and so validate) on the last step of the step budget."""
        if 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True


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


def default_callbacks(
    root_dir: str | Path, run: RunConfig, training: bool = True, checkpoints: bool = True, progress_bar: bool = False
) -> list[Callback]:
    """Callbacks of a run, in the order their hooks run; the one place that order is stated.

    The trainer's callbacks, as `tetraformer` runs them:
     1. those the config's `trainer.callbacks` lists;
     2. when training: NonFiniteGuard, FinalValidation (sets should_stop on the last step, before anything saves),
        and unless `--trainer.enable_checkpointing false` (`checkpoints`): Preemption, PeriodicCheckpoint,
        StepSnapshots (with `--run.keep_every_n_steps`) (RunCheckpoint is built here too but runs last, see 8);
     3. always: LearningRateMonitor, Throughput (counts the run's tokens), TimeBudget, DiscardUnstartedLogs (an
        error before the first batch removes the logs/version_N and offline W&B run Lightning started);
     4. as configured: TokenBudget (reads Throughput's count, so after it), SamplesTable, EarlyStopping;
        with a progress bar (`progress_bar`, cli/app.py decides) RichProgressBar on a terminal, else when training
        ProgressLines (log lines; reads Throughput's counts, so after it);
     5. when training: DataPosition (the checkpoint's loader state, where Lightning left it unloaded), LoggingStep
        (the loggers' step of a checkpoint a stop's validation saves), then RandomState (after what the others draw
        at train start, such as the peak probe or a new loader pass);
     6. `predict`: JsonlPredictionWriter (added by cli/app.py);
     7. Lightning's own when none is given: ModelSummary, TQDMProgressBar, Timer (`--trainer.max_time`); then the
        task module's `configure_callbacks` (image classification: AttentionRolloutImages);
     8. last, as Lightning moves every checkpoint callback to the end: RunCheckpoint (best.ckpt, last.ckpt).
    """
    throughput = Throughput(run.peak_tflops)
    callbacks: list[Callback] = [LearningRateMonitor("step"), throughput, TimeBudget(), DiscardUnstartedLogs()]
    if training:
        saving = [
            RunCheckpoint(Path(root_dir) / "checkpoints", run),
            Preemption(),
            PeriodicCheckpoint(run.save_every_n_steps, run.save_every_minutes),
        ]
        if run.keep_every_n_steps:
            saving.append(StepSnapshots(Path(root_dir) / "checkpoints", run.keep_every_n_steps))
        callbacks[:0] = [NonFiniteGuard(run.on_nonfinite), FinalValidation(), *(saving if checkpoints else [])]
    if run.max_tokens is not None:
        callbacks.append(TokenBudget(run.max_tokens, throughput))
    if run.samples:
        callbacks.append(SamplesTable())
    if run.early_stopping_patience is not None:
        callbacks.append(EarlyStopping(run.monitor, patience=run.early_stopping_patience, mode=run.monitor_mode))
    if progress_bar and sys.stdout.isatty():  # rich bars are noise in logs and CI (Lightning's own bar draws there)
        callbacks.append(RichProgressBar())
    elif not progress_bar and training and (run.progress_every_n_steps or run.progress_every_s):
        every = (run.progress_every_n_steps, run.progress_every_s)
        callbacks.append(ProgressLines(*every, counter=throughput, max_tokens=run.max_tokens))
    if training:  # last: restores the RNG states after what the others draw at train start (a peak probe)
        callbacks += [DataPosition(), LoggingStep(), RandomState()]
    return callbacks
