"""scripts/slurm/train.sbatch: the SBATCH contract (nodes, tasks and GPUs per node, USR1 before the limit,
requeue) and the `srun tetraformer fit` command line it runs, recorded by a fake srun.

The command's two tasks training as one DDP run through Lightning's SLURMEnvironment (ranks from SLURM_PROCID, no
processes of its own) and a first job starting from scratch under `--ckpt_path last` are
tests/training/checkpointing/test_preemption.py's two-rank run: its rank processes get the variables srun gives
each task and the script's `--ckpt_path last` (resumed the same way after SIGTERM)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.training.tiny_lm import quiet_env

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm" / "train.sbatch"
# Records its arguments (one a line) and runs nothing.
FAKE_SRUN = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$SRUN_RECORD"
"""


def _sbatch_options() -> dict[str, str]:
    """The script's `#SBATCH --name=value` options (a bare flag maps to "")."""
    options = re.findall(r"^#SBATCH --([\w-]+)(?:=(\S+))?", SCRIPT.read_text(), flags=re.M)
    return dict(options)


def _fake_srun(tmp_path: Path) -> Path:
    """A bin directory holding the fake srun."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN)
    srun.chmod(0o755)
    return bin_dir


def _sbatch(
    tmp_path: Path,
    config: Path,
    *args: str,
    tasks: int = 1,
    nodes: int = 1,
) -> subprocess.CompletedProcess:
    """Run the script as SLURM would start it on the first node of a job (with the fake srun on PATH)."""
    env = quiet_env(
        PATH=f"{_fake_srun(tmp_path)}:{os.environ['PATH']}",
        SRUN_RECORD=str(tmp_path / "srun.args"),
        SLURM_JOB_ID="4242",
        SLURM_JOB_NAME="tetraformer",
        SLURM_NNODES=str(nodes),
        SLURM_NTASKS=str(tasks * nodes),
        SLURM_NTASKS_PER_NODE=str(tasks),
        SLURM_CPUS_PER_TASK="1",
    )
    return subprocess.run(
        ["bash", str(SCRIPT), str(config), *args], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path
    )


def test_script_parses_and_asks_for_the_contract() -> None:
    """bash -n accepts it; it asks for nodes, one task per GPU, USR1 120 s before the limit and requeueing."""
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    options = _sbatch_options()
    assert {"nodes", "ntasks-per-node", "gpus-per-node", "requeue"} <= set(options)
    assert options["signal"] == "USR1@120" and options["ntasks-per-node"] == options["gpus-per-node"]
    assert "srun tetraformer fit" in SCRIPT.read_text()


def test_srun_command_line(tmp_path: Path) -> None:
    """srun runs `tetraformer fit` on the config with SLURM's node and task counts, resuming `last`, then the
    user's extra arguments."""
    done = _sbatch(tmp_path, Path("cfg.yaml"), "--trainer.max_steps", "3", tasks=4, nodes=2)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "srun.args").read_text().splitlines() == [
        "tetraformer",
        "fit",
        "-c",
        "cfg.yaml",
        "--trainer.num_nodes",
        "2",
        "--trainer.devices",
        "4",
        "--ckpt_path",
        "last",
        "--trainer.max_steps",
        "3",
    ]


def test_script_needs_a_config(tmp_path: Path) -> None:
    """Without a config argument it stops with its usage line before running anything."""
    done = subprocess.run(["bash", str(SCRIPT)], env=quiet_env(), capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode != 0 and "usage: sbatch" in done.stderr
