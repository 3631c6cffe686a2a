"""Fixtures for end-to-end token-classification runs through the `tetraformer` CLI, in-process."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import TINY_ARCH, config_runner, tiny_run_config
from tests.hf_folders import BERT_ARCH

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
    model = {
        "arch": dict(TINY_ARCH),
        "optim": {"lr": 1e-2, "warmup_steps": 5, "schedule": "constant", "weight_decay": 0.0},
        **(model or {}),
    }
    data = {"tokenizer_type": "wordpiece", "vocab_size": 100, "batch_size": 16, "max_length": 48, **data}
    return tiny_run_config(
        root,
        "tasks.token_classification.module.TokenClassification",
        "tasks.token_classification.data.TokenClassificationData",
        model,
        data,
        max_epochs=7,
    )


def write_splits(root: Path) -> dict[str, Path]:
    """Train / val / test CoNLL files of the tagging fixture under `root`."""
    return {
        name: write_conll(root / f"{name}.conll", tagged_sentences(n, seed))
        for name, n, seed in (("train", 240, 0), ("val", 60, 1), ("test", 60, 2))
    }


@pytest.fixture
def splits(tmp_path: Path) -> dict[str, Path]:
    """Train / val / test CoNLL files of the tagging fixture."""
    return write_splits(tmp_path)


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config (model and data overrides) and run `tetraformer SUBCOMMAND -c it ARGS...`."""
    return config_runner(tmp_path, monkeypatch, tiny_config)


def fit_on_splits(root: Path, *args: str, model: dict | None = None) -> tuple[Path, dict[str, Path]]:
    """(run dir, split files): the tiny config (with `model` overrides) fitted (with ARGS) on the fixture's splits
    written under `root`."""
    files = write_splits(root)
    with pytest.MonkeyPatch.context() as patch:
        run = config_runner(root, patch, tiny_config)(
            "fit", *args, model=model, train_path=str(files["train"]), val_path=str(files["val"])
        )
    return run, files


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """(run dir, split files) of the reference run a test file's run properties share: the tiny tagger's config
    in BERT's shape (so that it exports) for 4 steps, validated at steps 2 and 4, its last checkpoint written."""
    budget = (
        "--trainer.max_steps",
        "4",
        "--trainer.val_check_interval",
        "2",
        "--trainer.check_val_every_n_epoch",
        "null",
    )
    return fit_on_splits(tmp_path_factory.mktemp("tagger_reference"), *budget, model={"arch": BERT_ARCH})
