"""Fixtures for end-to-end token-classification runs through the `tetraformer` CLI, in-process."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import DATA_SEED, TEST_SEED, config_runner

# a learnable tagging fixture: names (a first name, sometimes a surname) and cities among filler words
FIRST, SURNAMES = ["anna", "boris", "carla", "dmitri"], ["smith", "jones", "novak"]
CITIES = ["paris", "oslo", "lima", "kyoto"]
FILLER = ["the", "a", "went", "to", "and", "met", "in", "saw", "today", "we", "with", "from"]


def tagged_sentences(n: int, seed: int, length: tuple[int, int] = (4, 9)) -> list[list[tuple[str, str]]]:
    """Sentences of (word, IOB2 tag): filler words with a person (B-PER [I-PER]) and maybe a city (B-LOC)."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(n):
        words = [(rng.choice(FILLER), "O") for _ in range(rng.randint(*length))]
        person = [(rng.choice(FIRST), "B-PER")] + ([(rng.choice(SURNAMES), "I-PER")] if rng.random() < 0.5 else [])
        at = rng.randint(0, len(words))
        words[at:at] = person
        if rng.random() < 0.6:
            words.insert(
                rng.choice([i for i in range(len(words) + 1) if not (at < i < at + len(person))]),
                (rng.choice(CITIES), "B-LOC"),
            )
        sentences.append(words)
    return sentences


def write_conll(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    """Sentences as CoNLL: word TAB tag, a blank line after each sentence."""
    path.write_text("".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in sentences), encoding="utf-8")
    return path


def tiny_config(root: Path, model: dict | None = None, **data: object) -> dict:
    """A very small tagger on a WordPiece tokenizer that learns the fixture in seconds on 2 cores."""
    return {
        "seed_everything": TEST_SEED,
        "trainer": {
            "default_root_dir": str(root),
            "max_epochs": 7,
            "log_every_n_steps": 1,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "accelerator": "cpu",
            "devices": 1,
        },
        "model": {
            "class_path": "tasks.token_classification.module.TokenClassification",
            "init_args": {
                "arch": {"d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "max_len": 64, "dropout": 0.0},
                "optim": {"lr": 1e-2, "warmup_steps": 5, "schedule": "constant", "weight_decay": 0.0},
                **(model or {}),
            },
        },
        "data": {
            "class_path": "tasks.token_classification.data.TokenClassificationData",
            "init_args": {
                "tokenizer_type": "wordpiece",
                "vocab_size": 100,
                "batch_size": 16,
                "max_length": 48,
                "seed": DATA_SEED,
                **data,
            },
        },
        "run": {"wandb": "disabled"},
    }


@pytest.fixture
def splits(tmp_path: Path) -> dict[str, Path]:
    """Train / val / test CoNLL files of the tagging fixture."""
    return {
        name: write_conll(tmp_path / f"{name}.conll", tagged_sentences(n, seed))
        for name, n, seed in (("train", 240, 0), ("val", 60, 1), ("test", 60, 2))
    }


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config (model and data overrides) and run `tetraformer SUBCOMMAND -c it ARGS...`."""
    return config_runner(tmp_path, monkeypatch, tiny_config)
