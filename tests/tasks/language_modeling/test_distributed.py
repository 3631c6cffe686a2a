"""DDP through the CLI: two CPU processes (gloo) train, validate and checkpoint one run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.tasks.language_modeling.conftest import tiny_config


@pytest.mark.distributed
def test_ddp_two_processes(text_file: Path, tmp_path: Path) -> None:
    """`--trainer.strategy ddp --trainer.devices 2` on the CPU runs to max_steps with one tokenizer and checkpoint,
    and the schedule's lines (6 steps are few) are logged once, by rank 0."""
    run = tmp_path / "run"
    config = tmp_path / "ddp.yaml"
    config.write_text(yaml.safe_dump(tiny_config(run, train_path=str(text_file), documents="line")))
    command = [
        sys.executable,
        "-m",
        "tetraformer.cli",
        "fit",
        "-c",
        str(config),
        "--trainer.strategy",
        "ddp",
        "--trainer.devices",
        "2",
        "--trainer.max_steps",
        "6",
    ]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "distributed_backend=gloo" in done.stderr and "All distributed processes registered" in done.stderr
    assert done.stderr.count("schedule has 6 optimizer steps") == 1
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 6 and (run / "tokenizer" / "tokenizer.json").is_file()
