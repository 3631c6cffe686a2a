"""Preemption: SIGTERM or SIGUSR1 stops the run at the next step boundary with last.ckpt saved, on every rank.

The one path for signals during training (Lightning's own SIGTERM handler and SLURM auto-requeue are set
aside): the handler only raises a flag; after the next optimizer step every rank learns whether any rank was
signalled, and all stop together. RunCheckpoint writes last.ckpt at the step a fit stops on; the run skips
the validation it would have run, exits 0 and logs the command that resumes it. Under SLURM a SIGUSR1 (the
warning `#SBATCH --signal=USR1@120` sends before the time limit) also requeues the job from global rank 0.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins.environments import ClusterEnvironment, SLURMEnvironment
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.trainer.states import TrainerFn

from tetraformer.training.callbacks.step_boundary import StepBoundary

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
REQUEUE_SIGNAL = signal.SIGUSR1


class Preemption(Callback):
    """Turns SIGTERM / SIGUSR1 into a clean stop at the next step boundary (see the module docstring)."""

    def __init__(self) -> None:
        self.received: set[int] = set()  # the signals this process got
        self.stopped_by: set[int] = set()  # the signals (of any rank) the run stopped for
        self._boundary = StepBoundary()
        self._previous: dict[int, Any] = {}

    def setup(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        """Catch the signals from the start of fit (data preparation included)."""
        if stage == "fit":
            self._install()

    def on_sanity_check_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Take SIGTERM back from the handler Lightning installed since, so ours is the only behaviour."""
        self._install()

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """The same when no sanity check ran (a resumed run)."""
        self._install()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """After each optimizer step, stop every rank when any rank was signalled (before the checkpoint hook)."""
        if not self._boundary.crossed(trainer):
            return  # accumulating gradients: not a step boundary
        self._stop_if_signalled(trainer)

    def on_validation_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """A signal during a validation stops the run right after it (which wrote last.ckpt), not a step later."""
        if not trainer.sanity_checking and trainer.state.fn == TrainerFn.FITTING:
            self._stop_if_signalled(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Say how to resume; under SLURM, requeue the job after a SIGUSR1 (global rank zero)."""
        if not self.stopped_by or not trainer.is_global_zero:
            return
        names = ", ".join(signal.Signals(signum).name for signum in sorted(self.stopped_by))
        log.info(
            "%s: stopped at step %d with last.ckpt saved; resume with: %s",
            names,
            trainer.global_step,
            resume_command(sys.argv[1:]),
        )
        if REQUEUE_SIGNAL in self.stopped_by and os.environ.get("SLURM_JOB_ID"):
            requeue_slurm_job()

    def teardown(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        """Give the signals back to the handlers they had before fit."""
        if threading.current_thread() is threading.main_thread():
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
        self._previous = {}

    def _stop_if_signalled(self, trainer: L.Trainer) -> None:
        """Ask every rank to stop when any was signalled; checkpoint hooks, called after ours, save last.ckpt."""
        signals = any_rank(trainer, self.received)
        if signals and not self.stopped_by:
            self.stopped_by = signals
            trainer.should_stop = True  # RunCheckpoint saves last.ckpt at the step a fit stops on
            trainer.limit_val_batches = 0  # no validation before exiting: the grace period is short

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        """Only note the signal: the training loop acts on it at the next step boundary."""
        self.received.add(signum)

    def _install(self) -> None:
        """Make `_handle` the handler of SIGTERM and SIGUSR1 (signals reach only the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            previous = signal.signal(signum, self._handle)
            self._previous.setdefault(signum, previous)


def any_rank(trainer: L.Trainer, received: set[int]) -> set[int]:
    """The signals any rank received, the same on every rank (one small all-reduce when distributed)."""
    if trainer.world_size == 1:
        return set(received)
    flags = torch.tensor([int(signum in received) for signum in SIGNALS], device=trainer.strategy.root_device)
    flags = trainer.strategy.reduce(flags, reduce_op="max")
    return {signum for signum, flag in zip(SIGNALS, flags.tolist(), strict=True) if flag}


def resume_command(argv: Sequence[str]) -> str:
    """The `tetraformer` command line of this run with `--ckpt_path last` in place of any --ckpt_path."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--ckpt_path":
            skip = True
        elif not arg.startswith("--ckpt_path="):
            kept.append(arg)
    return shlex.join(["tetraformer", *kept, "--ckpt_path", "last"])


def slurm_job_id() -> str:
    """The id `scontrol requeue` takes: ARRAYJOB_TASK for an array task, else SLURM_JOB_ID."""
    array_job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if array_job:
        return f"{array_job}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    return os.environ["SLURM_JOB_ID"]


def requeue_slurm_job() -> bool:
    """`scontrol requeue JOB`: True when it worked; a failure is logged, never raised (the checkpoint is safe)."""
    job = slurm_job_id()
    try:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        log.error("could not requeue SLURM job %s: %s", job, err)
        return False
    if done.returncode != 0:
        log.error("scontrol requeue %s failed (exit %d): %s", job, done.returncode, done.stderr.strip())
        return False
    log.info("requeued SLURM job %s", job)
    return True


def with_slurm_environment(plugins: list[Any]) -> list[Any]:
    """Under SLURM, a SLURMEnvironment without Lightning's auto-requeue (Preemption requeues), unless one is set."""
    if not SLURMEnvironment.detect() or any(isinstance(plugin, ClusterEnvironment) for plugin in plugins):
        return plugins
    return [*plugins, SLURMEnvironment(auto_requeue=False)]
