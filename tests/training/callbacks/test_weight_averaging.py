"""Lightning's weight averaging (EMA, SWA) from a config's `trainer.callbacks`: it averages the whole network."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.cli_runner import config_runner
from tests.tasks.language_modeling.conftest import tiny_config
from tests.training.resume_runs import STEPS, checkpoint, fit, same_tensors, write_config
from tests.training.tiny_lm import FIT_STEPS, corpus

EMA = "lightning.pytorch.callbacks.EMAWeightAveraging"
FROZEN_EMA = {"class_path": EMA, "init_args": {"decay": 1.0}}


def averaged_config(root: Path, **data: Any) -> dict:
    """The tiny LM with an EMA of decay 1: the average stays the weights after the first step."""
    config = tiny_config(root, **data)
    config["trainer"]["callbacks"] = [FROZEN_EMA]
    return config


def val_losses(run: Path) -> list[float]:
    """Every logged val/loss of the run, in order."""
    with next(run.rglob("metrics.csv")).open(encoding="utf-8") as f:
        return [float(row["val/loss"]) for row in csv.DictReader(f) if row.get("val/loss")]


@pytest.mark.slow
def test_the_average_holds_every_weight_and_is_what_validation_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The averaged copy is made after the network is built (the data's spec is handed over first), so checkpoints
    carry every weight of it, and validation scores it: frozen at step 1, it scores the same at steps 3 and 6."""
    run = config_runner(tmp_path, monkeypatch, averaged_config)
    root = run("fit", *FIT_STEPS, train_path=str(corpus(tmp_path)), documents="line")
    losses = val_losses(root)
    assert len(losses) == 2 and losses[0] == pytest.approx(losses[1], rel=1e-6)
    best = checkpoint(root, "best.ckpt")
    current = best["current_model_state"]
    assert best["state_dict"].keys() == current.keys() and any(k.startswith("net.") for k in current)
    moved = [k for k in current if not torch.equal(best["state_dict"][k], current[k])]
    assert moved, "the average equals the trained weights: it was not updated apart from them"


@pytest.mark.slow
def test_a_resumed_run_ends_with_the_uninterrupted_average_and_weights(tmp_path: Path) -> None:
    """Stopped mid-epoch and resumed with `--ckpt_path last`: the average and the trained weights both end
    bit-identical to the run that never stopped (the checkpoint carries both)."""
    ema = [{"class_path": EMA, "init_args": {"decay": 0.9}}]
    whole, part = tmp_path / "whole", tmp_path / "part"
    fit(write_config(tmp_path, whole, callbacks=ema))
    fit(write_config(tmp_path, part, callbacks=ema), "--trainer.max_steps", "7")
    fit(write_config(tmp_path, part, callbacks=ema), "--ckpt_path", "last")
    ends = [checkpoint(run) for run in (whole, part)]
    assert [c["global_step"] for c in ends] == [STEPS, STEPS]
    for key in ("state_dict", "current_model_state"):
        assert same_tensors(ends[0][key], ends[1][key]), key
    assert not all(torch.equal(v, ends[0]["current_model_state"][k]) for k, v in ends[0]["state_dict"].items())
