"""Progress as log lines: what a fit whose output goes to a file (nohup, SLURM, CI) shows instead of a progress bar."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, Timer

from tetraformer.errors import ConfigError
from tetraformer.training.base.run_length import schedule_length
from tetraformer.training.callbacks.step_boundary import StepBoundary
from tetraformer.training.callbacks.throughput import Throughput

log = logging.getLogger(__name__)


class ProgressLines(Callback):
    """Logs one line every `every_n_steps` optimizer steps or `every_s` seconds, whichever comes first, and one
    with the val/* metrics at the end of each validation; rank zero only.

    Home-made because Lightning's bars redraw one line (noise in a file) and read the loss on every step; HF Trainer
    and LitGPT log such lines instead. The loss is the mean over the batches since the last line, summed on the
    device and read only when a line is written (no host sync on the other steps). Rates come from the run's one
    counter (Throughput, which must come before this callback), over the training time since the last line
    (validations left out). The ETA is the nearest of the run's bounds: the schedule's length (max_steps, max_epochs
    or a token budget: run_length.schedule_length), --trainer.max_time and --run.max_tokens, at this process' mean
    pace so far.
    """

    def __init__(
        self,
        every_n_steps: int | None,
        every_s: float | None,
        counter: Throughput,
        max_tokens: int | None = None,
    ) -> None:
        for option, value in (("progress_every_n_steps", every_n_steps), ("progress_every_s", every_s)):
            if value is not None and value < 0:
                raise ConfigError(f"--run.{option} must be >= 0 (0 or null: none), got {value}")
        self.every_n_steps, self.every_s = every_n_steps or 0, every_s or 0.0
        self.counter, self.max_tokens = counter, max_tokens
        self._boundary = StepBoundary()
        self._loss_sum: torch.Tensor | None = None
        self._losses = 0
        self._start = self._last = Mark()
        self._total_steps = math.inf
        self._validation_start = 0.0

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Start the clock and the counts the lines' rates and ETA are taken from."""
        self._start = self._last = Mark.now(trainer, self.counter)
        self._boundary.step = trainer.global_step
        total, _ = schedule_length(trainer)  # the nearest of max_steps, max_epochs and a token budget
        self._total_steps = total if total is not None else math.inf

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Add the batch's loss (on the device); log a line when this batch ended an optimizer step that is due."""
        if not trainer.is_global_zero:
            return
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor):  # divided by the accumulated batches: undone when the line is written
            loss = loss.detach().float()
            self._loss_sum = loss if self._loss_sum is None else self._loss_sum + loss
            self._losses += 1
        if self._boundary.crossed(trainer) and self._due(trainer):
            log.info(self._line(trainer, batch_idx))

    def on_validation_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Note when the validation started: its time is left out of the next line's training rates."""
        self._validation_start = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Log the validation's val/* metrics with the step they judge."""
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        self._last = replace(self._last, time=self._last.time + time.perf_counter() - self._validation_start)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        values = " | ".join(f"{name} {value:.4g}" for name, value in metrics.items()) or "no val/ metrics"
        log.info("validation at step %d: %s", trainer.global_step, values)

    def _due(self, trainer: L.Trainer) -> bool:
        """Whether this optimizer step ends a period of steps or of seconds."""
        if self.every_n_steps and trainer.global_step % self.every_n_steps == 0:
            return True
        return bool(self.every_s) and time.perf_counter() - self._last.time >= self.every_s

    def _line(self, trainer: L.Trainer, batch_idx: int) -> str:
        """`step 120/5000 | epoch 0.48 | loss 2.3411 | lr 1.9e-03 | 10,782 tokens/s, 674.0 samples/s | elapsed
        0:01:02 | ETA 0:41:40`, restarting the loss mean and the rates' interval."""
        now, total = Mark.now(trainer, self.counter), self._total_steps
        parts = [f"step {now.step}" + (f"/{int(total)}" if math.isfinite(total) else "")]
        batches = trainer.num_training_batches
        if math.isfinite(batches) and batches:
            parts.append(f"epoch {trainer.current_epoch + (batch_idx + 1) / batches:.2f}")
        if self._loss_sum is not None:
            mean = self._loss_sum.item() * trainer.accumulate_grad_batches / self._losses  # the line's one host sync
            parts.append(f"loss {mean:.4f}")
        if trainer.optimizers:
            parts.append(f"lr {trainer.optimizers[0].param_groups[0]['lr']:.3g}")
        seconds = now.time - self._last.time
        if seconds > 0:
            tokens, samples = (now.tokens - self._last.tokens) / seconds, (now.samples - self._last.samples) / seconds
            parts.append(f"{tokens:,.0f} tokens/s, {samples:,.1f} samples/s")
        parts.append(f"elapsed {clock(now.time - self._start.time)}")
        eta = self._eta(trainer, now)
        if eta is not None:
            parts.append(f"ETA {clock(eta)}")
        self._loss_sum, self._losses, self._last = None, 0, now
        return " | ".join(parts)

    def _eta(self, trainer: L.Trainer, now: Mark) -> float | None:
        """Seconds left until the nearest bound of the run (steps or epochs, wall time, tokens), None if unbounded."""
        seconds, steps = now.time - self._start.time, now.step - self._start.step
        tokens = now.tokens - self._start.tokens
        left = []
        if steps > 0 and math.isfinite(self._total_steps):
            left.append((self._total_steps - now.step) * seconds / steps)
        timer = next((cb for cb in trainer.callbacks if isinstance(cb, Timer)), None)
        remaining = timer.time_remaining() if timer is not None else None
        if remaining is not None:
            left.append(remaining)
        if self.max_tokens is not None and tokens > 0:
            left.append((self.max_tokens - now.tokens) * seconds / tokens)
        return max(0.0, min(left)) if left else None


@dataclass(frozen=True)
class Mark:
    """The wall clock, optimizer step, and the run's token and sample counts at one moment."""

    time: float = 0.0
    step: int = 0
    tokens: int = 0
    samples: int = 0

    @classmethod
    def now(cls, trainer: L.Trainer, counter: Throughput) -> Mark:
        """This moment's."""
        return cls(time.perf_counter(), trainer.global_step, counter.tokens_seen, counter.samples_seen)


def clock(seconds: float) -> str:
    """H:MM:SS (days as `1 day, H:MM:SS`)."""
    return str(timedelta(seconds=round(seconds)))
