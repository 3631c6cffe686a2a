"""Fixtures for end-to-end language-modelling runs through the `tetraformer` CLI, in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.cli_runner import DATA_SEED, TEST_SEED, config_runner
from tetraformer.cli import main

TEXT = "First Citizen: Before we proceed any further, hear me speak.\n"


def tiny_config(root: Path, **data: object) -> dict:
    """A config for a very small char-level GPT that trains in seconds on 2 cores."""
    return {
        "seed_everything": TEST_SEED,
        "trainer": {
            "default_root_dir": str(root),
            "max_steps": 20,
            "val_check_interval": 5,
            "check_val_every_n_epoch": None,
            "log_every_n_steps": 1,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "accelerator": "cpu",
            "devices": 1,
        },
        "model": {
            "class_path": "tasks.language_modeling.module.LanguageModeling",
            "init_args": {
                "arch": {"d_model": 64, "n_heads": 2, "n_layers": 2, "d_ff": 128, "max_len": 64, "position": "rotary"},
                "optim": {"lr": 3e-3, "warmup_steps": 5, "schedule": "constant", "weight_decay": 0.0},
                "sample_prompts": ["First"],
                "generation": {"max_new_tokens": 8},
            },
        },
        "data": {
            "class_path": "tasks.language_modeling.data.LanguageModelingData",
            "init_args": {"tokenizer_type": "char", "block_size": 16, "batch_size": 8, "seed": DATA_SEED, **data},
        },
        "run": {"wandb": "disabled"},
    }


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    """A short text repeated as twelve one-line documents."""
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT * 12, encoding="utf-8")
    return path


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config (with data overrides) and run `tetraformer SUBCOMMAND -c it ARGS...`; returns the run dir."""
    return config_runner(tmp_path, monkeypatch, tiny_config)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny run (10 steps on the fixture text), shared read-only by tests that need a checkpoint."""
    root = tmp_path_factory.mktemp("trained")
    corpus = root / "corpus.txt"
    corpus.write_text(TEXT * 12, encoding="utf-8")
    config = root / "fit.yaml"
    config.write_text(yaml.safe_dump(tiny_config(root / "run", train_path=str(corpus), documents="line")))
    main(["fit", "-c", str(config), "--trainer.max_steps", "10"])
    return root / "run"
