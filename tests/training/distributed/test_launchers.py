"""torchrun launches `tetraformer fit` on one node or several: Lightning joins torchrun's processes
(TorchElasticEnvironment) instead of starting its own, and the run trains to the end with one tokenizer.

Two "nodes" of one process each prove what one node of two processes would: Lightning takes its ranks from
torchrun's environment either way (a rank that started its own, or ignored torchrun's node rank, would not be
MEMBER 2/2), and only global rank 0 prepares the run. DDP with activation checkpointing also trains on ranks forked
from the test process (tests/training/distributed/test_lora_ddp.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.processes import free_port
from tests.training.tiny_lm import lm_config_file, quiet_env

TOKENIZER_TRAINED = "training a char tokenizer"


def torchrun(*torchrun_args: str, config: Path, fit_args: list[str]) -> list[str]:
    """`torchrun TORCHRUN_ARGS -m tetraformer.cli fit -c CONFIG FIT_ARGS` with this interpreter."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *torchrun_args,
        "-m",
        "tetraformer.cli",
        "fit",
        "-c",
        str(config),
        *fit_args,
    ]


def _finished(run: Path, steps: int) -> None:
    """The run's last.ckpt is at `steps` and its tokenizer was written."""
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == steps
    assert (run / "tokenizer" / "tokenizer.json").is_file()


@pytest.mark.distributed
def test_torchrun_two_nodes(tmp_path: Path) -> None:
    """Two torchrun "nodes" (`--nnodes 2 --node_rank R --rdzv_endpoint HOST:PORT`, one process each) with
    `--trainer.num_nodes 2` train one run (activation checkpointing on); only global rank 0 trains the tokenizer into
    the shared run directory."""
    run = tmp_path / "run"
    config = lm_config_file(tmp_path, run)
    endpoint = f"127.0.0.1:{free_port()}"
    fit_args = [
        "--trainer.strategy",
        "ddp",
        "--trainer.num_nodes",
        "2",
        "--trainer.devices",
        "1",
        "--trainer.max_steps",
        "6",
        "--model.arch.activation_checkpointing",
        "true",
    ]
    paths = [tmp_path / f"node{rank}.log" for rank in (0, 1)]  # files, not pipes: a full pipe would stall a node
    with paths[0].open("w") as log0, paths[1].open("w") as log1:
        nodes = [
            subprocess.Popen(
                torchrun(
                    "--nnodes",
                    "2",
                    "--node_rank",
                    str(rank),
                    "--nproc_per_node",
                    "1",
                    "--rdzv_endpoint",
                    endpoint,
                    config=config,
                    fit_args=fit_args,
                ),
                env=quiet_env(),
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=tmp_path,
            )
            for rank, log in enumerate((log0, log1))
        ]
        codes = [node.wait(timeout=600) for node in nodes]
    logs = [path.read_text() for path in paths]
    assert codes == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    assert "GLOBAL_RANK: 0, MEMBER: 1/2" in logs[0] and "GLOBAL_RANK: 1, MEMBER: 2/2" in logs[1]
    assert TOKENIZER_TRAINED in logs[0] and TOKENIZER_TRAINED not in logs[1]
    _finished(run, 6)
