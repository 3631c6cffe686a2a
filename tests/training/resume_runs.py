"""Tiny language-model runs with dropout, stopped and resumed through the CLI, and the weights they end with."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import yaml
from lightning.pytorch.callbacks import Callback

from tests.processes import free_port
from tests.tasks.language_modeling.conftest import TEXT, tiny_config
from tetraformer.cli import main

STEPS = 20  # every run trains to this step; validations every 5 steps; 6 batches an epoch (41 blocks of 8)
THREADS = "1"  # every run on one thread: the same bits in and out of process, and fast on a busy machine


class Pace(Callback):
    """Sleeps after each training batch, so a signal or a kill lands mid-run (it changes no number); two steps
    before the end it waits for the file `release` (the test writes it once it has signalled or killed the run), so
    that the run cannot end before however late a busy machine lets the test act. Once released (a resumed run) it
    neither sleeps nor waits."""

    def __init__(self, release: str, seconds: float = 0.1, hang_guard_s: float = 600) -> None:
        self.release, self.seconds, self.hang_guard_s = Path(release), seconds, hang_guard_s

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        """Wait a little, or for the release near the end."""
        if self.release.exists():
            return
        time.sleep(self.seconds)
        if trainer.global_step == STEPS - 2:
            deadline = time.monotonic() + self.hang_guard_s
            while not self.release.exists() and time.monotonic() < deadline:
                time.sleep(0.05)


class SignalAt(Callback):
    """Sends this process a signal at the end of one training step, or as the validation after it starts."""

    def __init__(self, step: int, signum: int, validating: bool = False) -> None:
        self.step, self.signum, self.validating = step, signum, validating

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        """Signal ourselves on the chosen step."""
        if trainer.global_step == self.step and not self.validating:
            os.kill(os.getpid(), self.signum)

    def on_validation_start(self, trainer: Any, *args: Any) -> None:
        """Or as the validation of the chosen step starts."""
        if trainer.global_step == self.step and self.validating and not trainer.sanity_checking:
            os.kill(os.getpid(), self.signum)


def paced(release: Path) -> dict[str, Any]:
    """Trainer options for write_config: about 0.1 s a step, held before the end until `release` exists."""
    return {"callbacks": [{"class_path": f"{__name__}.Pace", "init_args": {"release": str(release)}}]}


def signalled(step: int, signum: int, validating: bool = False) -> dict[str, Any]:
    """Trainer options for write_config: the run signals itself at `step` (SignalAt)."""
    sender = {"step": step, "signum": int(signum), "validating": validating}
    return {"callbacks": [{"class_path": f"{__name__}.SignalAt", "init_args": sender}]}


def write_config(root: Path, run: Path, **trainer: Any) -> Path:
    """A tiny char-level GPT config with dropout (so resuming must restore the RNG) training on a fixture text."""
    corpus = root / "corpus.txt"
    if not corpus.is_file():
        corpus.write_text(TEXT * 12, encoding="utf-8")
    config = tiny_config(run, train_path=str(corpus), documents="line")
    config["model"]["init_args"]["arch"].update(dropout=0.1, attn_dropout=0.1)
    config["trainer"].update(max_steps=STEPS, **trainer)
    path = root / f"{run.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def fit(config: Path, *args: str) -> None:
    """`tetraformer fit -c CONFIG ARGS...` in this process (on THREADS threads)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(int(THREADS))
    try:
        main(["fit", "-c", str(config), *args])
    finally:
        torch.set_num_threads(previous)


def command(config: Path, *args: str) -> list[str]:
    """The same as a command line for a subprocess."""
    return [sys.executable, "-m", "tetraformer.cli", "fit", "-c", str(config), *args]


def start(config: Path, *args: str, log: Path, **env: str) -> subprocess.Popen:
    """Start `fit` in a subprocess (W&B off, on THREADS threads, with `env` added) writing its output to `log`."""
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": THREADS, **env}
    with log.open("w") as out:
        return subprocess.Popen(command(config, *args), env=env, stdout=out, stderr=subprocess.STDOUT)


def start_ranks(config: Path, *args: str, logs: Path, world: int = 2) -> list[subprocess.Popen]:
    """Start one `fit` process per rank as `srun` starts a job's tasks on one node (so each rank can be signalled
    alone): Lightning's SLURMEnvironment takes the ranks from SLURM_PROCID and starts no processes of its own."""
    port = str(free_port())
    ranks = []
    for rank in range(world):
        env = {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "SLURM_JOB_ID": "4242",
            "SLURM_JOB_NAME": "tetraformer",
            "SLURM_NNODES": "1",
            "SLURM_NTASKS": str(world),
            "SLURM_NTASKS_PER_NODE": str(world),
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank),
            "SLURM_NODEID": "0",
        }
        ranks.append(start(config, *args, log=logs / f"rank{rank}.log", **env))
    return ranks


def checkpoint(run: Path, name: str = "last.ckpt") -> dict[str, Any]:
    """A checkpoint of a run."""
    return torch.load(run / "checkpoints" / name, weights_only=True, map_location="cpu")


def wait_for_step(run: Path, step: int, process: subprocess.Popen, timeout: float = 300) -> int:
    """Poll last.ckpt until it holds `step` or later (the process still running); the step it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if (run / "checkpoints" / "last.ckpt").is_file():
            saved = checkpoint(run)["global_step"]  # written atomically: never a half file
            if saved >= step:
                return saved
        time.sleep(0.02)
    raise AssertionError(f"{run}: no last.ckpt at step {step} (exit code {process.poll()})")


def same_tensors(left: dict[str, Any], right: dict[str, Any]) -> bool:
    """Whether two state dicts hold bit-identical tensors (all of them, same names)."""
    return left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


def same_weights(a: Path, b: Path) -> bool:
    """Whether two runs' last.ckpt hold bit-identical tensors (all of them, same names)."""
    return same_tensors(checkpoint(a)["state_dict"], checkpoint(b)["state_dict"])
