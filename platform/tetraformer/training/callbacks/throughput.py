"""Throughput and MFU of a training run: logged per interval (metrics.csv, W&B) and summarised when training ends."""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from tetraformer.core.accounting import TokenCost
from tetraformer.training.callbacks.peak import corrected_peak_tflops, measured_peak_tflops, precision_dtype
from tetraformer.training.reports.loggers import logs_this_step, wandb_logger

log = logging.getLogger(__name__)
PeakTflops = float | Literal["auto"] | None


class Throughput(Callback):
    """Logs train/tokens_per_s, train/samples_per_s and train/mfu (against the device peak: configured, or measured
    at train start with `auto`; none with None) over each logging interval, and time/elapsed_s (wall seconds since fit
    start) with each validation. When training ends it logs the run's means (train/mean_*) to every logger, the
    peak as train/peak_tflops, and the same as W&B summary keys. A measured peak below the rate an interval reaches
    (MFU above 100%) was measured under load: it is re-measured and replaced (peak.corrected_peak_tflops).

    `tokens_seen` (all ranks, kept in checkpoints so it counts over resumes) is the run's training tokens. What a
    token is belongs to the task (`batch_tokens`; a ViT's are [CLS] + patches); samples are rows or images, and
    `samples_seen` counts them (all ranks, this process only: it serves rates, such as ProgressLines').
    """

    def __init__(self, peak_tflops: PeakTflops = "auto") -> None:
        self.peak_tflops = peak_tflops
        self.peak_flops = peak_tflops * 1e12 if isinstance(peak_tflops, float | int) else None
        self.costs: dict[str, TokenCost] = {}
        self.interval = Tally()
        self.total = Tally()
        self.fit_start: float | None = None
        self.tokens_seen = 0
        self.samples_seen = 0
        self.peak_remeasured = False  # a measured peak is re-measured once a run, then only raised to rates reached

    def state_dict(self) -> dict[str, Any]:
        """The run's training tokens so far, saved in checkpoints."""
        return {"tokens_seen": self.tokens_seen}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the token count of the run a checkpoint resumes."""
        self.tokens_seen = state_dict.get("tokens_seen", 0)

    def on_fit_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Start the wall clock that time/elapsed_s reads."""
        self.fit_start = time.perf_counter()

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Log the wall seconds since fit start (and CUDA's peak allocated memory) on the validation's row."""
        if self.fit_start is None or trainer.sanity_checking:
            return
        pl_module.log("time/elapsed_s", time.perf_counter() - self.fit_start, on_step=False, on_epoch=True)
        if pl_module.device.type == "cuda":
            peak_mb = torch.cuda.max_memory_allocated(pl_module.device) / 2**20
            pl_module.log("system/cuda_max_allocated_mb", peak_mb, on_step=False, on_epoch=True)

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Count the network's per-token FLOPs once, on a meta-device twin (unaffected by sharding); measure the
        device's matmul peak in the run's precision when asked to (`auto`)."""
        if self.peak_tflops == "auto" and self.peak_flops is None:
            start = time.perf_counter()
            self.peak_flops = measured_peak_tflops(pl_module.device, precision_dtype(trainer.precision)) * 1e12
            log.info(
                "MFU peak: %.2f TFLOP/s, measured in %.2f s",
                self.peak_flops / 1e12,
                time.perf_counter() - start,
            )
        if not self.costs:
            with torch.device("meta"):
                twin = pl_module.make_network(pl_module.net.cfg)
            self.costs = pl_module.flop_costs(twin)
        self.interval, self.total = Tally(), Tally()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Start the clock on the first batch of an interval."""
        self.interval.begin()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Count this batch; log the interval's rates on the rows Lightning writes (every N steps, the final one)."""
        tokens, samples = pl_module.batch_tokens(batch) * trainer.world_size, batch_rows(batch) * trainer.world_size
        self.tokens_seen += tokens
        self.samples_seen += samples
        flops = pl_module.batch_flops(batch, self.costs) * trainer.world_size
        self.interval.add(tokens, samples, flops)
        if logs_this_step(trainer):
            self._log_interval(trainer, pl_module)

    def _log_interval(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Log the interval's rates and fold it into the run's total."""
        interval, self.interval = self.interval.end(), Tally()
        if interval.seconds <= 0 or not interval.tokens:
            return
        self._check_peak(trainer, pl_module, interval)
        for name, value in interval.rates(self.peak_flops, trainer.world_size).items():
            pl_module.log(f"train/{name}", value, on_step=True, on_epoch=False)
        self.total.merge(interval)

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Log the run's mean rates and MFU with the peak they were taken against (logs, every logger, W&B summary)."""
        self.total.merge(self.interval.end())
        self.interval = Tally()
        if self.total.seconds <= 0 or not self.total.tokens:
            return
        self._check_peak(trainer, pl_module, self.total)
        means = {f"train/mean_{k}": v for k, v in self.total.rates(self.peak_flops, trainer.world_size).items()}
        if self.peak_flops:
            means["train/peak_tflops"] = self.peak_flops / 1e12
        if not trainer.is_global_zero:
            return
        log.info(summary_line(means, self.peak_source(), pl_module.token_unit))
        for logger in trainer.loggers:
            logger.log_metrics(means, step=trainer.global_step)
        wandb = wandb_logger(trainer.loggers)
        if wandb is not None:
            wandb.experiment.summary.update({**means, "train/peak_source": self.peak_source()})

    def _check_peak(self, trainer: L.Trainer, pl_module: Any, tally: Tally) -> None:
        """Correct a measured peak that this tally's FLOP/s (one device's) exceeds: it was measured under load."""
        reached = tally.flops / tally.seconds / trainer.world_size
        if self.peak_tflops != "auto" or not self.peak_flops or reached <= self.peak_flops:
            return
        dtype = precision_dtype(trainer.precision)
        peak = corrected_peak_tflops(pl_module.device, dtype, reached / 1e12, remeasure=not self.peak_remeasured)
        self.peak_flops, self.peak_remeasured = peak * 1e12, True

    def peak_source(self) -> str:
        """Where the MFU peak came from: measured (auto), configured (a number), or none."""
        return "none" if not self.peak_flops else "measured" if self.peak_tflops == "auto" else "configured"


class Tally:
    """Tokens, samples and FLOPs over a stretch of wall time (one logging interval, or a run's intervals summed)."""

    def __init__(self) -> None:
        self.tokens, self.samples, self.flops, self.seconds = 0, 0, 0.0, 0.0
        self.start: float | None = None

    def begin(self) -> None:
        """Start the clock unless it runs."""
        if self.start is None:
            self.start = time.perf_counter()

    def add(self, tokens: int, samples: int, flops: float) -> None:
        """Count one batch."""
        self.tokens, self.samples, self.flops = (
            self.tokens + tokens,
            self.samples + samples,
            self.flops + flops,
        )

    def end(self) -> Tally:
        """Stop the clock; this tally."""
        if self.start is not None:
            self.seconds += time.perf_counter() - self.start
            self.start = None
        return self

    def merge(self, other: Tally) -> None:
        """Add another (ended) tally's counts and time."""
        self.add(other.tokens, other.samples, other.flops)
        self.seconds += other.seconds

    def rates(self, peak_flops: float | None, world_size: int) -> dict[str, float]:
        """tokens_per_s and samples_per_s (all ranks), and mfu (one device's FLOP/s over its peak) when known."""
        rates = {"tokens_per_s": self.tokens / self.seconds, "samples_per_s": self.samples / self.seconds}
        if peak_flops:
            rates["mfu"] = self.flops / self.seconds / world_size / peak_flops
        return rates


def batch_rows(batch: Any) -> int:
    """Rows (sequences, pairs or images) of a batch: the first dimension of its first tensor."""
    values = batch.values() if isinstance(batch, dict) else batch
    return next(v.shape[0] for v in values if isinstance(v, torch.Tensor))


def summary_line(means: dict[str, float], peak_source: str, token_unit: str) -> str:
    """One line: the run's mean throughput, and its MFU with the peak it was taken against."""
    line = (
        f"training throughput: {means['train/mean_tokens_per_s']:,.0f} {token_unit}/s, "
        f"{means['train/mean_samples_per_s']:,.1f} samples/s"
    )
    if "train/mean_mfu" in means:
        line += f"; MFU {means['train/mean_mfu']:.2%} of {means['train/peak_tflops']:.3g} TFLOP/s ({peak_source} peak)"
    else:
        line += "; no MFU (--run.peak_tflops null)"
    return line
