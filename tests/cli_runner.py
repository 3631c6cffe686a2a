"""Run `tetraformer` in-process on a tiny config: the one runner the task tests' `run_cli` fixtures share."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tetraformer.cli import main

# The seed of every test fit: seed_everything (weights, dropout, masks) and data.seed (batch order, held-out splits).
# A learning test holds on any of them, with a margin: `TETRAFORMER_TEST_SEED=N pytest -m learning` reruns those
# tests on seed_everything N and data.seed 1234 + N (N = 0, the default, is the data modules' own default order).
TEST_SEED = int(os.environ.get("TETRAFORMER_TEST_SEED", "0"))
DATA_SEED = 1234 + TEST_SEED


def config_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build: Callable[..., dict[str, Any]]
) -> Callable[..., Path]:
    """`run(SUBCOMMAND, *ARGS, root=None, **options)`: writes `build(root, **options)` as a config, runs
    `tetraformer SUBCOMMAND -c it ARGS...` and returns the run directory (default tmp_path/run)."""
    monkeypatch.setenv("WANDB_SILENT", "true")

    def run(subcommand: str, *args: str, root: Path | None = None, **options: Any) -> Path:
        root = root or tmp_path / "run"
        config = tmp_path / f"{subcommand}-{root.name}.yaml"
        config.write_text(yaml.safe_dump(build(root, **options)))
        main([subcommand, "-c", str(config), *args])
        return root

    return run


def last_metrics(run: Path, stage: str = "val") -> dict[str, float]:
    """The last logged value of each `stage/...` metric in the run's metrics.csv."""
    found: dict[str, float] = {}
    for path in sorted(run.rglob("metrics.csv")):
        with path.open(encoding="utf-8") as f:
            for row in csv.DictReader(f):
                for key, value in row.items():
                    if key.startswith(f"{stage}/") and value:
                        found[key] = float(value)
    return found


def checkpoint_command(subcommand: str, ckpt: Path, out: Path, *args: str) -> Path:
    """Run `tetraformer SUBCOMMAND --ckpt_path CKPT ARGS...` with the checkpoint alone (W&B off, outputs under
    `out`); the command's own directory, out/eval/SUBCOMMAND-1."""
    main(
        [subcommand, "--ckpt_path", str(ckpt), "--run.wandb", "disabled", "--trainer.default_root_dir", str(out), *args]
    )
    return out / "eval" / f"{subcommand}-1"


def predictions(ckpt: Path, data: Path | str, out: Path, *args: str) -> list[dict[str, Any]]:
    """`tetraformer predict` of `data` from the checkpoint alone: the records of its predictions.jsonl."""
    written = checkpoint_command("predict", ckpt, out, "--data.predict_path", str(data), *args) / "predictions.jsonl"
    return [json.loads(line) for line in written.read_text(encoding="utf-8").splitlines()]


TINY_ARCH: dict[str, Any] = {"d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "max_len": 64, "dropout": 0.0}


def tiny_run_config(
    root: Path,
    module: str,
    data_module: str,
    model: dict[str, Any],
    data: dict[str, Any],
    **trainer: Any,
) -> dict[str, Any]:
    """A test fit's config: the quiet one-device CPU trainer every task's tiny config shares (with `trainer`'s
    budget on top), the task's module and data classes (`package.module.Class` paths) with their init args, W&B off."""
    return {
        "seed_everything": TEST_SEED,
        "trainer": {
            "default_root_dir": str(root),
            "log_every_n_steps": 1,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "accelerator": "cpu",
            "devices": 1,
            **trainer,
        },
        "model": {"class_path": module, "init_args": model},
        "data": {"class_path": data_module, "init_args": {"seed": DATA_SEED, **data}},
        "run": {"wandb": "disabled"},
    }
