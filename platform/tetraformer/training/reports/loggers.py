"""Loggers: Weights & Biases (offline unless credentials are set) and a CSV logger writing metrics.csv."""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import lightning as L
from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger

from tetraformer.errors import above, at_least

log = logging.getLogger(__name__)
WandbMode = Literal["auto", "online", "offline", "disabled"]


@dataclass
class RunConfig:
    """Who the run is for W&B, and how checkpoints and early stopping judge it."""

    project: str = "tetraformer"
    name: str | None = None
    group: str | None = None
    tags: list[str] = field(default_factory=list)
    wandb: WandbMode = "auto"  # auto: online with credentials, offline run directory otherwise
    monitor: str = "val/loss"  # metric that picks the best checkpoint
    monitor_mode: Literal["min", "max"] = "min"
    early_stopping_patience: int | None = None  # validations without improvement before stopping
    samples: bool = True  # log a table of qualitative samples at each validation
    # MFU's peak: auto (a matmul timed at train start), one device's TFLOP/s (989: H100 bf16 dense), or null
    peak_tflops: float | Literal["auto"] | None = "auto"
    max_tokens: int | None = None  # stop training after this many training tokens (or images)
    on_nonfinite: Literal["stop", "skip"] = "stop"  # a NaN/inf loss or gradient norm: stop the run, or skip the batch
    collective_timeout_s: float = 600.0  # a distributed collective waiting longer than this ends the job
    save_every_n_steps: int | None = None  # also write last.ckpt every N optimizer steps (between validations)
    save_every_minutes: float | None = None  # also write last.ckpt once M minutes passed since it was written
    keep_every_n_steps: int | None = None  # keep checkpoints/step-N.ckpt every N optimizer steps (weights only)
    # with no progress bar (output to a file): a log line every N optimizer steps or S seconds, whichever comes
    # first, and one per validation; 0/null turns either off, both off: no lines
    progress_every_n_steps: int | None = 100
    progress_every_s: float | None = 60.0

    def __post_init__(self) -> None:
        """Reject counts and times that cannot work: an OptionError names the field."""
        at_least(self, 0, early_stopping_patience=self.early_stopping_patience)
        at_least(
            self,
            1,
            max_tokens=self.max_tokens,
            save_every_n_steps=self.save_every_n_steps,
            keep_every_n_steps=self.keep_every_n_steps,
        )
        above(self, 0, collective_timeout_s=self.collective_timeout_s, save_every_minutes=self.save_every_minutes)
        if not isinstance(self.peak_tflops, str):
            above(self, 0, peak_tflops=self.peak_tflops)


def wandb_mode(requested: WandbMode) -> str:
    """Resolve "auto": online only when an API key is configured and WANDB_MODE does not say otherwise."""
    if requested != "auto":
        return requested
    env_mode = os.environ.get("WANDB_MODE", "").lower()
    if env_mode in ("offline", "disabled", "online"):
        return env_mode
    has_key = bool(os.environ.get("WANDB_API_KEY")) or _netrc_has_wandb()
    return "online" if has_key else "offline"


def _netrc_has_wandb() -> bool:
    """True when `wandb login` stored credentials in ~/.netrc."""
    netrc = Path.home() / ".netrc"
    return netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="ignore")


class RunCSVLogger(CSVLogger):
    """CSVLogger whose version folder can be taken back: a run that stopped before its first step leaves none.

    Lightning creates the folder (and hparams.yaml) before the data is set up; CSVLogger alone cannot remove it,
    and its `finalize` would write into it again after a removal.
    """

    discarded = False

    def discard(self) -> None:
        """Remove this run's logs/version_N folder (and logs/ when nothing else is in it); nothing is written later."""
        self.discarded = True
        version_dir = Path(self.log_dir)
        if version_dir.is_dir():
            shutil.rmtree(version_dir)
            _remove_if_empty(version_dir.parent)

    def save(self) -> None:
        """Write metrics.csv and hparams.yaml, unless the run's logs were discarded."""
        if not self.discarded:
            super().save()


def make_loggers(root_dir: str | Path, run: RunConfig, resume_id: str | None = None) -> list[Logger]:
    """CSV logger (RUN_DIR/logs/version_N/metrics.csv) plus W&B unless disabled (resuming `resume_id`)."""
    root = Path(root_dir)
    loggers: list[Logger] = [RunCSVLogger(save_dir=root, name="logs")]  # logs/version_N/metrics.csv, one per run
    mode = wandb_mode(run.wandb)
    if mode != "disabled":
        root.mkdir(parents=True, exist_ok=True)
        loggers.append(
            WandbLogger(
                save_dir=str(root),
                project=run.project,
                name=run.name,
                group=run.group,
                tags=run.tags or None,
                offline=mode == "offline",
                id=resume_id,
                resume="allow" if resume_id else None,
            )
        )
        sync = f"; upload later: wandb sync {root / 'wandb'}/offline-run-*" if mode == "offline" else ""
        log.info("W&B logging %s (%s%s)", mode, root / "wandb", sync)
    return loggers


def wandb_logger(loggers: list[Logger]) -> WandbLogger | None:
    """The W&B logger among a trainer's loggers, if any."""
    return next((lg for lg in loggers if isinstance(lg, WandbLogger)), None)


def started_wandb_run(loggers: list[Logger]) -> Any:
    """The W&B run a W&B logger among these started in this process, or None (no logger, not used, other ranks)."""
    if wandb_logger(loggers) is None:
        return None
    import wandb

    return wandb.run  # what the logger's experiment is once started; asking the logger would start one


def finish_wandb_run(run: Any, exit_code: int = 0) -> None:
    """Close a W&B run so its (offline) files are complete before the command returns."""
    import wandb

    run.finish(exit_code=exit_code)
    wandb.teardown()  # waits for the W&B service to write everything (offline finish alone may not)


def discard_logs(loggers: list[Logger]) -> None:
    """Take back what the loggers started for a run that stopped before its first step, so a retry logs to the
    same version: the CSV version folder, and an offline W&B run (an online one is closed as failed)."""
    for logger in loggers:
        if isinstance(logger, RunCSVLogger):
            logger.discard()
    run = started_wandb_run(loggers)
    if run is None:
        return
    if not run.offline:
        finish_wandb_run(run, exit_code=1)
        log.warning("the W&B run %s stopped before its first step and is marked failed", run.url)
        return
    run_dir = Path(run.sync_dir)
    finish_wandb_run(run, exit_code=1)
    wandb_dir = run_dir.parent
    for link in wandb_dir.iterdir():  # latest-run, debug.log, debug-internal.log point into the run's folder
        if link.is_symlink() and link.resolve().is_relative_to(run_dir.resolve()):
            link.unlink()
    shutil.rmtree(run_dir)
    _remove_if_empty(wandb_dir)
    log.info("removed the W&B run %s: the run stopped before its first step", run_dir)


def _remove_if_empty(directory: Path) -> None:
    """Remove a folder that holds nothing."""
    if directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()


def logs_this_step(trainer: L.Trainer) -> bool:
    """Whether Lightning writes this training step's logged values to the loggers (every log_every_n_steps, the
    step training stops on): the one read of Lightning's private logger connector, which no public API exposes."""
    return trainer._logger_connector.should_update_logs  # no public API: Lightning's rule, kept in one place
