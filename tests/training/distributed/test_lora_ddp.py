"""LoRA under DDP on two CPU processes: frozen base weights are no trouble for the gradient all-reduce.

The two ranks are forked from the test process (tests/training/forked_ranks.py). The CLI's own `ddp` launcher, rank 1
a fresh `tetraformer` process, is proven in test_distributed_failures.py, test_launchers.py and
tests/training/checkpointing/test_preemption.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.training.forked_ranks import logged_to, own_port
from tests.training.tiny_lm import assert_usable_checkpoint, lm_config_file
from tetraformer.cli import main


@pytest.mark.distributed
def test_lora_fit_under_ddp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ranks train adapters (activation checkpointing on) and save merged weights: a plain, usable checkpoint."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    own_port(monkeypatch)
    run = tmp_path / "run"
    config = lm_config_file(tmp_path, run, devices=2, strategy="ddp_fork", max_steps=6, val_check_interval=3)
    lora = ["--model.lora.rank", "4", "--model.lora.save", "merged", "--model.lora.targets", "[q, v, ff_in]"]
    with logged_to(tmp_path / "fit.log") as log:
        main(["fit", "-c", str(config), *lora, "--model.arch.activation_checkpointing", "true"])
    said = log.read_text()
    assert "LoRA rank 4 (alpha 16) on 4 layers (q, v, ff_in)" in said
    ckpt = assert_usable_checkpoint(run)
    assert len(ckpt["rng_states"]) == 2  # both ranks' random states: it trained as two processes
