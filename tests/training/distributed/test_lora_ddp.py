"""LoRA under DDP on two CPU processes: frozen base weights are no trouble for the gradient all-reduce."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.training.tiny_lm import assert_usable_checkpoint, cli_command, lm_config_file, quiet_env


@pytest.mark.distributed
def test_lora_fit_under_ddp(tmp_path: Path) -> None:
    """Two ranks train adapters (activation checkpointing on) and save merged weights: a plain, usable checkpoint."""
    run = tmp_path / "run"
    config = lm_config_file(tmp_path, run, devices=2, strategy="ddp", max_steps=6, val_check_interval=3)
    lora = ["--model.lora.rank", "4", "--model.lora.save", "merged", "--model.lora.targets", "[q, v, ff_in]"]
    args = ["fit", "-c", str(config), *lora, "--model.arch.activation_checkpointing", "true"]
    done = subprocess.run(cli_command(*args), env=quiet_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LoRA rank 4 (alpha 16) on 4 layers (q, v, ff_in)" in done.stderr
    assert_usable_checkpoint(run)
