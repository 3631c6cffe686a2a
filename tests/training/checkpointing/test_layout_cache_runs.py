"""A bf16 CPU run ends with the same weights whether accel's layout cache was empty or filled.

Filled mid-run: a bf16-mixed run killed with -9 on an empty cache (filling it) and resumed on the filled cache ends
with the weights of a run on another empty cache, in fresh processes (tests/promises/test_resume.py, text
classification).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.resume_runs import fit, same_weights, write_config
from tetraformer.accel import chooser
from tetraformer.accel.chooser import LayoutChooser

SHORT = ("--trainer.max_steps", "6")  # past the validation at step 5, whose W&B samples time the one-row head
BF16 = {"precision": "bf16-mixed"}  # on the CPU: the run's Linear layers time and take the measured bf16 layouts

pytestmark = pytest.mark.slow  # CLI fits


def fresh_chooser(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """What a new process starts with: a chooser (the real timer) that reads `cache` on first use."""
    monkeypatch.setenv("TETRAFORMER_CACHE_DIR", str(cache))
    monkeypatch.setattr(chooser, "CHOOSER", LayoutChooser())


def cached_keys(cache: Path) -> set[str]:
    """The shapes the layout cache holds a choice for (every machine's)."""
    machines = json.loads((cache / "matmul_layouts-v2.json").read_text())
    return {key for choices in machines.values() for key in choices}


def test_empty_and_filled_layout_cache_give_the_same_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bf16-mixed fit with dropout (validation's W&B samples included), first on an empty layout cache,
    which it fills, then on that cache: torch.equal weights in last.ckpt."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    runs = [tmp_path / "empty", tmp_path / "filled"]
    for run in runs:
        fresh_chooser(monkeypatch, cache)
        fit(write_config(tmp_path, run, **BF16), "--run.wandb", "offline", *SHORT)
    keys = cached_keys(cache)
    assert {key.split()[0] for key in keys} >= {"fwd", "dx", "dw"}, keys  # the training step's layouts were timed
    assert any(key.startswith("row 1x") for key in keys), keys  # and the samples' one-row head copy
    assert same_weights(*runs)
