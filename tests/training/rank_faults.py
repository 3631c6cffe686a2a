"""Failing ranks for distributed tests: a callback that ends or stalls one rank mid-training, and a DDP runner."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import lightning as L
import yaml
from lightning.pytorch.callbacks import Callback

from tests.tasks.language_modeling.conftest import TEXT, tiny_config

Fault = Literal["exit", "hang"]


class RankFault(Callback):
    """At `step`, rank `rank` exits (os._exit) or hangs, noting the time in `pid_dir`/failed_at;
    every rank writes its pid and start time to `pid_dir`/rankN when training starts."""

    def __init__(self, step: int, rank: int, fault: Fault, pid_dir: str) -> None:
        self.step, self.rank, self.fault, self.pid_dir = step, rank, fault, Path(pid_dir)

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Tell the test which processes to look for afterwards (pid and start time: a pid may be reused)."""
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        (self.pid_dir / f"rank{trainer.global_rank}").write_text(f"{os.getpid()} {started(os.getpid())}")

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Fail on the chosen step and rank."""
        if trainer.global_step != self.step or trainer.global_rank != self.rank:
            return
        (self.pid_dir / "failed_at").write_text(str(time.time()))
        if self.fault == "exit":
            os._exit(3)
        time.sleep(3600)


def ddp_fit(
    tmp_path: Path, config: dict, *args: str, timeout: float = 400
) -> tuple[subprocess.CompletedProcess, float]:
    """Run `tetraformer fit` of `config` on two CPU processes (gloo); returns the finished process and its seconds.

    `timeout` only guards against a hang: on a busy machine two ranks take minutes to start and train.
    """
    path = tmp_path / "ddp.yaml"
    path.write_text(yaml.safe_dump(config))
    command = [
        sys.executable,
        "-m",
        "tetraformer.cli",
        "fit",
        "-c",
        str(path),
        "--trainer.strategy",
        "ddp",
        "--trainer.devices",
        "2",
        *args,
    ]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    return done, time.monotonic() - start


def lm_config(tmp_path: Path) -> dict:
    """tiny_config on a fixture text written into tmp_path, validating every 5 steps."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT * 12, encoding="utf-8")
    return tiny_config(tmp_path / "run", train_path=str(corpus), documents="line")


def with_fault(config: dict, tmp_path: Path, step: int, rank: int, fault: Fault) -> dict:
    """The config with a RankFault callback writing pids to tmp_path/pids."""
    fault_cb = {
        "class_path": "tests.training.rank_faults.RankFault",
        "init_args": {"step": step, "rank": rank, "fault": fault, "pid_dir": str(tmp_path / "pids")},
    }
    config["trainer"]["callbacks"] = [fault_cb]
    return config


def started(pid: int) -> int | None:
    """A process's start time (clock ticks after boot), None once it is gone or a zombie awaiting its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    state, *fields = stat.rsplit(")", 1)[1].split()  # after "pid (command)": state, ppid, ... starttime is 22nd
    return None if state in "ZX" else int(fields[18])


def still_running(pid_dir: Path, timeout: float = 60) -> list[int]:
    """The job's ranks (pids written by RankFault) still running after waiting up to `timeout` s for them to end.

    A rank that outlives the process the test waited for exits after a poll of its parent (or the kernel is still
    tearing it down): on a busy machine that takes a while, so the test waits for it instead of looking once.
    """
    ranks = [tuple(map(int, path.read_text().split())) for path in sorted(pid_dir.glob("rank*"))]
    deadline = time.monotonic() + timeout
    while True:
        running = [pid for pid, start in ranks if started(pid) == start]
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.1)
