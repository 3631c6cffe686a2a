"""scripts/slurm/train.sbatch: the SBATCH contract (nodes, tasks and GPUs per node, USR1 before the limit,
requeue) and the `srun tetraformer fit` it runs, checked with a fake srun that runs tasks as SLURM would."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.processes import free_port
from tests.training.tiny_lm import lm_config_file, quiet_env

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm" / "train.sbatch"
# Records its arguments, then (unless SRUN_DRY_RUN) runs them as SLURM_NTASKS tasks of one node, with the
# variables srun gives each task.
FAKE_SRUN = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$SRUN_RECORD"
[ -n "${SRUN_DRY_RUN:-}" ] && exit 0
pids=()
for ((i = 0; i < SLURM_NTASKS; i++)); do
  SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
"""


def _sbatch_options() -> dict[str, str]:
    """The script's `#SBATCH --name=value` options (a bare flag maps to "")."""
    options = re.findall(r"^#SBATCH --([\w-]+)(?:=(\S+))?", SCRIPT.read_text(), flags=re.M)
    return dict(options)


def _fake_srun(tmp_path: Path) -> Path:
    """A bin directory holding the fake srun and this environment's `tetraformer`."""
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
    dry: bool = False,
) -> subprocess.CompletedProcess:
    """Run the script as SLURM would start it on the first node of a job (with the fake srun on PATH)."""
    port = free_port()
    tetraformer = Path(sys.executable).parent
    env = quiet_env(
        PATH=f"{_fake_srun(tmp_path)}:{tetraformer}:{os.environ['PATH']}",
        SRUN_RECORD=str(tmp_path / "srun.args"),
        SLURM_JOB_ID="4242",
        SLURM_JOB_NAME="tetraformer",
        SLURM_NNODES=str(nodes),
        SLURM_NTASKS=str(tasks * nodes),
        SLURM_NTASKS_PER_NODE=str(tasks),
        SLURM_CPUS_PER_TASK="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        **({"SRUN_DRY_RUN": "1"} if dry else {}),
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
    done = _sbatch(tmp_path, Path("cfg.yaml"), "--trainer.max_steps", "3", tasks=4, nodes=2, dry=True)
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


@pytest.mark.distributed
@pytest.mark.skipif(
    shutil.which("tetraformer", path=str(Path(sys.executable).parent)) is None,
    reason="needs the `tetraformer` console script beside this Python",
)
def test_two_tasks_train_one_ddp_run(tmp_path: Path) -> None:
    """Two srun tasks on the CPU become one DDP run through Lightning's SLURMEnvironment (ranks from SLURM_PROCID,
    no processes of its own), and the script's `--ckpt_path last` starts a first job from scratch.

    A requeued job is the same script run again: test_srun_command_line shows it asks for `--ckpt_path last`, and
    tests/training/checkpointing/test_preemption.py resumes two rank processes that way to the weights of a run that
    never stopped (and requeues on SIGUSR1)."""
    run = tmp_path / "run"
    config = lm_config_file(tmp_path, run, max_steps=4)
    first = _sbatch(tmp_path, config, tasks=2)
    assert first.returncode == 0, first.stderr[-3000:]
    members = sorted(line.split("MEMBER: ")[1] for line in first.stderr.splitlines() if "MEMBER: " in line)
    assert members == ["1/2", "2/2"]
    assert "Restoring states from the checkpoint path" not in first.stderr
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4
