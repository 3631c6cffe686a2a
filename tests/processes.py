"""Run the installed `tetraformer` script in fresh processes: how the promises a user relies on are proven.

An in-process CLI run shares imports and state with every test before it (a module one test imported registers
what another command never imports, a cache one test filled answers another), so each promise is checked here in
a new interpreter, through the console script a user runs, with its own empty cache directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]  # the repository: configs name callbacks under `tests.`
SCRIPT = Path(sys.executable).parent / "tetraformer"  # the console script pip installed beside this interpreter
TIMEOUT_S = 600  # a hang guard only: a tiny fit takes seconds, but a busy 2-core machine may take minutes


class ProcessFailed(AssertionError):
    """A command that was meant to succeed (or fail) did not; carries its output."""


def fresh_env(cache_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a new user's shell: offline W&B, one torch thread, this cache dir and nothing else ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETRAFORMER_", "PYTEST_"))}
    env.update(
        TETRAFORMER_CACHE_DIR=str(cache_dir),
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        OMP_NUM_THREADS="1",
        PYTHONPATH=str(ROOT),  # so configs may name test callbacks (tests.training.resume_runs.Pace)
        HF_HUB_OFFLINE="1",
    )
    env.update(extra)
    return env


def tetraformer(
    *args: str | Path, cache_dir: Path, check: bool = True, env: Mapping[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """`tetraformer ARGS...` in a new process; with `check`, a non-zero exit fails with the command's output."""
    done = subprocess.run(
        [str(SCRIPT), *map(str, args)],
        cwd=cwd,
        env=fresh_env(cache_dir, **(env or {})),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if check and done.returncode != 0:
        raise ProcessFailed(explain(done))
    return done


def failing(*args: str | Path, cache_dir: Path, env: Mapping[str, str] | None = None) -> str:
    """The `error: ...` lines of a command that must exit non-zero (fails if it succeeds or crashes with a
    traceback instead of one clear line)."""
    done = tetraformer(*args, cache_dir=cache_dir, check=False, env=env)
    if done.returncode == 0:
        raise ProcessFailed(f"expected a failure:\n{explain(done)}")
    if "Traceback (most recent call last)" in done.stderr:
        raise ProcessFailed(f"expected one clear line, got a traceback:\n{explain(done)}")
    return "\n".join(line for line in done.stderr.splitlines() if "error" in line.lower())


def killed_after(
    *args: str | Path, cache_dir: Path, ready: Callable[[], bool], env: Mapping[str, str] | None = None
) -> None:
    """Start `tetraformer ARGS...`, wait until `ready()` (e.g. a checkpoint file exists), then kill -9 it."""
    proc = subprocess.Popen(
        [str(SCRIPT), *map(str, args)],
        cwd=ROOT,
        env=fresh_env(cache_dir, **(env or {})),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + TIMEOUT_S
    while not ready():
        if proc.poll() is not None:
            raise ProcessFailed(f"the run ended (exit {proc.returncode}) before it was killed:\n{proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise ProcessFailed("the run never became ready to kill")
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (for a multi-process run's MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def explain(done: subprocess.CompletedProcess[str]) -> str:
    """A finished command, its exit status and the tail of its output."""
    return f"$ {' '.join(done.args)}\nexit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"


def write_yaml(path: Path, config: dict[str, Any]) -> Path:
    """A config dict as a YAML file."""
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def checkpoint_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint, flattened to one name each: network weights and the optimizer's moments."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    found: dict[str, torch.Tensor] = {f"weight/{k}": v for k, v in ckpt["state_dict"].items()}
    for i, opt in enumerate(ckpt.get("optimizer_states", [])):
        for param, state in opt["state"].items():
            for name, value in state.items():
                if isinstance(value, torch.Tensor):
                    found[f"optimizer{i}/{param}/{name}"] = value
    return found


def differing(a: Path, b: Path) -> list[str]:
    """Names of the tensors two checkpoints disagree on (not torch.equal), or hold only one of."""
    left, right = checkpoint_tensors(a), checkpoint_tensors(b)
    names = sorted(set(left) | set(right))
    return [n for n in names if n not in left or n not in right or not torch.equal(left[n], right[n])]
