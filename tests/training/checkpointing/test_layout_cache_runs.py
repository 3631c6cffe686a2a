"""A bf16 CPU run ends with the same weights whether accel's layout cache was empty, filled, or filled mid-run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.training.resume_runs import STEPS, checkpoint, fit, killed_run, paced, same_weights, write_config
from tetraformer.accel import chooser
from tetraformer.accel.chooser import LayoutChooser

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
        fit(write_config(tmp_path, run, **BF16), "--run.wandb", "offline")
    keys = cached_keys(cache)
    assert {key.split()[0] for key in keys} >= {"fwd", "dx", "dw"}, keys  # the training step's layouts were timed
    assert any(key.startswith("row 1x") for key in keys), keys  # and the samples' one-row head copy
    assert same_weights(*runs)


def test_kill_resume_across_a_layout_cache_filled_in_between(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kill -9` of a bf16-mixed fit that started on an empty layout cache (filling it), resumed on the filled cache:
    the same weights as a straight run on the filled cache."""
    cache = tmp_path / "cache"
    fresh_chooser(monkeypatch, cache)  # the environment the killed process inherits
    at_least = random.randint(2, STEPS - 6)
    run = tmp_path / "run"
    release = tmp_path / "killed"
    config = write_config(tmp_path, run, **BF16, **paced(release))
    killed_at = killed_run(config, run, at_least, release, tmp_path / "killed.log")
    assert cached_keys(cache), "the killed half timed nothing"
    fresh_chooser(monkeypatch, cache)
    fit(config, "--ckpt_path", "last")
    straight = tmp_path / "straight"
    fresh_chooser(monkeypatch, cache)
    fit(write_config(tmp_path, straight, **BF16))
    assert checkpoint(run)["global_step"] == checkpoint(straight)["global_step"] == STEPS
    assert same_weights(run, straight), f"killed after step {killed_at}"
