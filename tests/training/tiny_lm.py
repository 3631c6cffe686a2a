"""Tiny language-model runs for the strategy, precision, compile and launcher tests: in-process or as commands."""

from __future__ import annotations

import csv
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from tests.cli_runner import config_runner
from tests.tasks.language_modeling.conftest import TEXT, tiny_config
from tetraformer.training.base.text_generation import TextGenerationConfig
from tetraformer.training.checkpointing.loading import load_task_module

FIT_STEPS = ["--trainer.max_steps", "6", "--trainer.val_check_interval", "3"]


def corpus(tmp_path: Path) -> Path:
    """The fixture text as twelve one-line documents."""
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT * 12, encoding="utf-8")
    return path


def lm_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """`fit(*ARGS, root=None)`: an in-process `tetraformer fit` of the tiny LM for 6 steps; returns the run dir."""
    run = config_runner(tmp_path, monkeypatch, tiny_config)
    text = corpus(tmp_path)

    def fit(*args: str, root: Path | None = None) -> Path:
        return run("fit", *FIT_STEPS, *args, root=root, train_path=str(text), documents="line")

    return fit


def lm_config_file(tmp_path: Path, run: Path, **trainer: Any) -> Path:
    """A tiny LM config file (trainer settings overridden) for runs in other processes."""
    config = tiny_config(run, train_path=str(corpus(tmp_path)), documents="line")
    config["trainer"].update(trainer)
    path = tmp_path / "fit.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cli_command(*args: str) -> list[str]:
    """`python -m tetraformer.cli ARGS` with this interpreter."""
    return [sys.executable, "-m", "tetraformer.cli", *args]


def quiet_env(**extra: str) -> dict[str, str]:
    """This process's environment (PYTHONPATH included) without W&B, plus `extra`."""
    return {**os.environ, "WANDB_MODE": "disabled", **extra}


def train_losses(run: Path) -> list[float]:
    """Every train/loss the run's metrics.csv files logged."""
    losses: list[float] = []
    for path in sorted(run.glob("logs/version_*/metrics.csv")):
        with path.open() as f:
            losses += [float(r["train/loss"]) for r in csv.DictReader(f) if r.get("train/loss")]
    return losses


def assert_usable_checkpoint(run: Path, steps: int = 6) -> dict[str, Any]:
    """The run logged finite losses and wrote last.ckpt at `steps`; it loads as an fp32 module that generates.

    Returns the raw checkpoint.
    """
    losses = train_losses(run)
    assert losses and all(math.isfinite(loss) for loss in losses), losses
    path = run / "checkpoints" / "last.ckpt"
    ckpt = torch.load(path, weights_only=False, map_location="cpu")
    assert ckpt["global_step"] == steps
    module = load_task_module(path)
    assert {p.dtype for p in module.net.parameters()} == {torch.float32}
    (text,) = module.generate(["First"], TextGenerationConfig(max_new_tokens=8, do_sample=False))
    assert isinstance(text, str) and text
    eager_keys = {f"net.{k}" for k in module.make_network(module.net.cfg).state_dict()}
    assert set(ckpt["state_dict"]) == eager_keys  # no wrapper prefixes (_orig_mod., _fsdp_wrapped_module.)
    return ckpt
