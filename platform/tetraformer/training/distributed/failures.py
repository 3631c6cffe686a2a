"""A failing rank ends the whole job instead of leaving the others waiting on their next collective.

Collectives give up after `--run.collective_timeout_s` (the process group's timeout, set on whichever
strategy the trainer resolved: `ddp` as a string, `auto` on several devices, fsdp, deepspeed). Until the ranks
have started, joined and prepared their data (the strategy's `setup`), the group waits at least
STARTUP_TIMEOUT_S: a short collective timeout must not fail a rank that is slow to start. Lightning's
launcher already ends rank 0 when a rank it spawned dies; the reverse is watched here: a rank spawned by rank 0
exits when rank 0 is gone. Launchers that start every rank themselves (torchrun, SLURM) clean up on their own.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
from datetime import timedelta

import lightning as L
import torch
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.strategies.launchers import _SubprocessScriptLauncher

log = logging.getLogger(__name__)
LAUNCHER_PID = "TETRAFORMER_LAUNCHER_PID"  # set by a rank that spawns the others, read by them
POLL_S = 1.0
ORPHAN_EXIT_CODE = 1
# the rendezvous and rank 0's data preparation (the others wait in a barrier) get this long, whatever the
# collective timeout
STARTUP_TIMEOUT_S = 600.0


def guard_ranks(trainer: L.Trainer, collective_timeout_s: float) -> None:
    """Apply the collective timeout, and tie this process's life to the rank that spawned it (if any)."""
    if apply_collective_timeout(trainer.strategy, collective_timeout_s):
        trainer.callbacks.append(CollectiveTimeout(collective_timeout_s))
    destroy_process_group_at_exit()
    watch_launcher()
    if spawns_ranks(trainer):
        os.environ[LAUNCHER_PID] = str(os.getpid())  # the ranks it spawns inherit it


def apply_collective_timeout(strategy: object, seconds: float) -> bool:
    """Give a distributed strategy's process group max(seconds, STARTUP_TIMEOUT_S) to form, unless its config chose
    a timeout; True when CollectiveTimeout should then bring collectives down to `seconds`."""
    if getattr(strategy, "_timeout", None) != default_pg_timeout:
        return False
    strategy._timeout = timedelta(seconds=max(seconds, STARTUP_TIMEOUT_S))  # public only as a constructor argument
    return True


class CollectiveTimeout(Callback):
    """Once every rank has joined and prepared its data, collectives wait at most `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Set the default process group's timeout (private in torch: `_set_pg_timeout`, for gloo and NCCL)."""
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            from torch.distributed.distributed_c10d import _set_pg_timeout

            _set_pg_timeout(timedelta(seconds=self.seconds))


def spawns_ranks(trainer: L.Trainer) -> bool:
    """Whether this process is the rank 0 that Lightning's launcher starts the other local ranks from."""
    launcher = trainer.strategy.launcher
    return isinstance(launcher, _SubprocessScriptLauncher) and not (
        launcher.cluster_environment.creates_processes_externally
    )


def watch_launcher() -> None:
    """In a rank that rank 0 spawned, a daemon thread that ends the process once rank 0 is gone."""
    launcher_pid = os.environ.get(LAUNCHER_PID)
    if launcher_pid is None or launcher_pid != str(os.getppid()) or os.environ.get("LOCAL_RANK", "0") == "0":
        return
    threading.Thread(
        target=_exit_when_orphaned, args=(int(launcher_pid),), daemon=True, name="tetraformer-launcher-watch"
    ).start()


def _exit_when_orphaned(launcher_pid: int) -> None:
    """Poll the parent; when it changes (rank 0 died, this process was re-parented) say so and exit at once."""
    while os.getppid() == launcher_pid:
        time.sleep(POLL_S)
    log.error("local rank %s: rank 0 (pid %d) is gone; ending this rank too", os.environ["LOCAL_RANK"], launcher_pid)
    os._exit(ORPHAN_EXIT_CODE)  # the main thread may be blocked in a collective: no clean shutdown possible


@functools.cache
def destroy_process_group_at_exit() -> None:
    """Close this process's process group when it exits, once registered (Lightning does so for NCCL only).

    A gloo group left to interpreter shutdown can abort a rank that finished its work ("terminate called without
    an active exception", SIGABRT), turning a successful run into a failed one.
    """
    atexit.register(_destroy_process_group)


def _destroy_process_group() -> None:
    """Destroy the default process group if one is up (a local call: it waits on no other rank)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
