"""Fixtures for end-to-end masked-LM runs through the `tetraformer` CLI, in-process."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import DATA_SEED, TEST_SEED, config_runner

WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
]


def topic_corpus(n_documents: int, seed: int = 0) -> str:
    """Documents of sentences repeating the document's one word: a masked word is learnable only from context."""
    rng = random.Random(seed)
    documents = []
    for _ in range(n_documents):
        word = rng.choice(WORDS)
        sentences = [" ".join([word] * rng.randint(3, 5)) + " ." for _ in range(rng.randint(2, 4))]
        documents.append("\n".join(sentences))
    return "\n\n".join(documents) + "\n"


def tiny_config(root: Path, next_sentence: bool = False, **data: object) -> dict:
    """A config for a very small BERT that trains in seconds on 2 cores."""
    return {
        "seed_everything": TEST_SEED,
        "trainer": {
            "default_root_dir": str(root),
            "max_steps": 20,
            "val_check_interval": 10,
            "check_val_every_n_epoch": None,
            "log_every_n_steps": 1,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "accelerator": "cpu",
            "devices": 1,
        },
        "model": {
            "class_path": "tasks.masked_lm.module.MaskedLanguageModeling",
            "init_args": {
                "arch": {
                    "d_model": 64,
                    "n_heads": 2,
                    "n_layers": 2,
                    "d_ff": 128,
                    "max_len": 64,
                    "norm_position": "post",
                    "embedding_norm": True,
                    "norm_eps": 1e-12,
                },
                "optim": {"lr": 3e-3, "warmup_steps": 10, "schedule": "constant", "weight_decay": 0.0},
                "next_sentence": next_sentence,
            },
        },
        "data": {
            "class_path": "tasks.masked_lm.data.MaskedLMData",
            "init_args": {
                "vocab_size": 100,
                "max_length": 32,
                "batch_size": 16,
                "val_fraction": 0.2,
                "seed": DATA_SEED,
                **data,
            },
        },
        "run": {"wandb": "disabled"},
    }


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """200 one-word documents of 2-4 sentences, blank-line separated."""
    path = tmp_path / "corpus.txt"
    path.write_text(topic_corpus(200), encoding="utf-8")
    return path


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config (with data overrides) and run `tetraformer SUBCOMMAND -c it ARGS...`; returns the run dir."""
    return config_runner(tmp_path, monkeypatch, tiny_config)
