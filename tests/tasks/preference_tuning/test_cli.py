"""Preference tuning through the installed script, as a user runs it: DPO with LoRA from a Hugging Face Qwen2 folder
in a fresh `tetraformer fit` learns the held-out pairs (`make test-learning`). Its promises (exact resume, changed
data refused, every command from the checkpoint alone, the export) are the promise matrix's, on a reference of the
same setting (tests/promises/conftest.py)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch

from tests.cli_runner import last_metrics
from tests.processes import tetraformer, write_yaml
from tests.tasks.preference_tuning.conftest import LORA, tiny_config

NAMES = ("loss", "rewards_chosen", "rewards_rejected", "reward_margin", "reward_accuracy", "preference_accuracy")


@pytest.fixture(scope="module")
def dpo_run(qwen2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tetraformer fit`: DPO with LoRA (every projection and the head) from the Qwen2 folder on the reversed pairs,
    a quarter held out, 16 steps validated at 8 and 16; the run folder."""
    base = tmp_path_factory.mktemp("dpo-lora")
    config = write_yaml(base / "dpo.yaml", tiny_config(base / "run", {"init_from": str(qwen2), "lora": LORA}))
    tetraformer("fit", "-c", config, cache_dir=base / "cache")
    return base / "run"


@pytest.mark.learning
def test_dpo_with_lora_logs_rewards_and_learns_the_held_out_pairs(dpo_run: Path) -> None:
    """Every step and validation logs the loss, both rewards, their margin and the accuracies; the first step's loss
    is ln 2 (new adapters: the policy is its reference); the held-out pairs' reward accuracy, 0 at the start (every
    reward 0), ends at 0.8 or more with a positive margin; the checkpoint holds the adapters only."""
    val, train = last_metrics(dpo_run), last_metrics(dpo_run, "train")
    assert {f"val/{name}" for name in NAMES} <= set(val) and {f"train/{name}" for name in NAMES} <= set(train)
    assert abs(first_logged(dpo_run, "train/loss") - math.log(2)) < 1e-5
    assert val["val/reward_accuracy"] >= 0.8 and val["val/reward_margin"] > 0, val
    stored = torch.load(dpo_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    assert stored and all(".lora_" in name for name in stored)


def first_logged(run: Path, key: str) -> float:
    """The first value of `key` in the run's metrics.csv."""
    with next(run.rglob("metrics.csv")).open(encoding="utf-8") as f:
        return next(float(row[key]) for row in csv.DictReader(f) if row.get(key))
