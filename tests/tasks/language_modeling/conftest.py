"""Fixtures for end-to-end language-modelling runs through the `tetraformer` CLI, in-process."""

from __future__ import annotations

import csv
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers

from tasks.language_modeling.data import LanguageModelingData
from tests.cli_runner import config_runner, tiny_run_config

TEXT = "First Citizen: Before we proceed any further, hear me speak.\n"
LANGUAGE_MODELING = "tasks.language_modeling.module.LanguageModeling"

# The reference run: 12 steps (validated at 5, 10 and the 12 it stops on, between intervals), 5 batches an epoch
# (val_fraction 0.2: it stops mid-epoch 2), train rows every third step, a configured MFU peak, a command-line model
# override, an offline W&B run. A resume of it repeats these options with a larger --trainer.max_steps.
REFERENCE_DATA: dict[str, object] = {"documents": "line", "val_fraction": 0.2}
REFERENCE_ARGS = (
    *("--trainer.max_steps", "12", "--trainer.log_every_n_steps", "3", "--model.arch.d_ff", "96"),
    *("--run.peak_tflops", "1.0", "--run.wandb", "auto"),
)


def tiny_config(root: Path, **data: object) -> dict:
    """A config for a very small char-level GPT that trains in seconds on 2 cores."""
    model = {
        "arch": {"d_model": 64, "n_heads": 2, "n_layers": 2, "d_ff": 128, "max_len": 64, "position": "rotary"},
        "optim": {"lr": 3e-3, "warmup_steps": 5, "schedule": "constant", "weight_decay": 0.0},
        "sample_prompts": ["First"],
        "generation": {"max_new_tokens": 8},
    }
    data = {"tokenizer_type": "char", "block_size": 16, "batch_size": 8, **data}
    trainer = {"max_steps": 20, "val_check_interval": 5, "check_val_every_n_epoch": None}
    return tiny_run_config(
        root, LANGUAGE_MODELING, "tasks.language_modeling.data.LanguageModelingData", model, data, **trainer
    )


def write_text(path: Path) -> Path:
    """The fixture text: TEXT repeated as twelve one-line documents."""
    path.write_text(TEXT * 12, encoding="utf-8")
    return path


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    """A short text repeated as twelve one-line documents."""
    return write_text(tmp_path / "corpus.txt")


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config (with data overrides) and run `tetraformer SUBCOMMAND -c it ARGS...`; returns the run dir."""
    return config_runner(tmp_path, monkeypatch, tiny_config)


def reference_corpus(reference: Path) -> Path:
    """The fixture text the reference run trained on (beside its run dir)."""
    return reference.parent / "corpus.txt"


def reference_data(reference: Path) -> dict[str, object]:
    """The data options of the reference run, for a fit that resumes, reruns or validates it."""
    return {"train_path": str(reference_corpus(reference)), **REFERENCE_DATA}


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run (REFERENCE_ARGS on the fixture text), which every test of an ordinary run's artifacts reads:
    built once per test worker, never written to (a test that resumes or reruns it works on a `run_copy`)."""
    root = tmp_path_factory.mktemp("lm_reference")
    write_text(root / "corpus.txt")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        return config_runner(root, patch, tiny_config)("fit", *REFERENCE_ARGS, **reference_data(root / "run"))


@pytest.fixture
def run_copy(trained_run: Path, tmp_path: Path) -> Path:
    """A copy of the reference run at tmp_path/run, the directory `run_cli` fits into, to resume or rerun."""
    return Path(shutil.copytree(trained_run, tmp_path / "run"))


def validation_loss(run: Path) -> float:
    """The last val/loss of the newest metrics.csv of a run directory."""
    metrics = max(run.glob("logs/version_*/metrics.csv"), key=lambda p: p.stat().st_mtime)
    with metrics.open() as f:
        return [float(r["val/loss"]) for r in csv.DictReader(f) if r.get("val/loss")][-1]


def hf_validation_loss(model_dir: Path, text_file: Path, architecture: str = "GPT2LMHeadModel") -> float:
    """transformers' own mean next-token loss (the `architecture` class of `model_dir`) over the blocks the
    datamodule builds for validation of `text_file`."""
    data = LanguageModelingData(val_path=str(text_file), tokenizer=str(model_dir), block_size=16, documents="line")
    data.setup("validate")
    val = data.datasets["val"]
    blocks = torch.stack([val[i] for i in range(len(val))])  # (N, T + 1)
    model = getattr(transformers, architecture).from_pretrained(model_dir).eval()
    with torch.no_grad():
        logits = model(input_ids=blocks[:, :-1]).logits  # (N, T, V)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), blocks[:, 1:].flatten()).item()
