"""Fixtures for end-to-end masked-LM runs through the `tetraformer` CLI, in-process."""

from __future__ import annotations

import csv
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import config_runner, predictions, tiny_run_config

MASKED_LM = "tasks.masked_lm.module.MaskedLanguageModeling"

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
    model = {
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
    }
    data = {"vocab_size": 100, "max_length": 32, "batch_size": 16, "val_fraction": 0.2, **data}
    trainer = {"max_steps": 20, "val_check_interval": 10, "check_val_every_n_epoch": None}
    return tiny_run_config(root, MASKED_LM, "tasks.masked_lm.data.MaskedLMData", model, data, **trainer)


# A line of each mask form: BERT's `[MASK]` is read as the tokenizer's `<mask>`.
MASKED_TEXT = "seven seven <mask> seven .\nnine [MASK] nine nine . nine nine <mask> .\n"


def metric_rows(run: Path, key: str) -> list[float]:
    """Every logged value of one metric in the run's (newest) metrics.csv, in order."""
    metrics = max(run.glob("logs/version_*/metrics.csv"), key=lambda p: p.stat().st_mtime)
    with metrics.open() as f:
        return [float(r[key]) for r in csv.DictReader(f) if r.get(key)]


def fill_masks(ckpt: Path, tmp_path: Path) -> list[dict]:
    """`predict` of MASKED_TEXT from the checkpoint alone; asserts each line's record is its text (masks read as
    `<mask>`) with the top-5 candidates of each of its masks, and returns the records."""
    texts = tmp_path / "masked.txt"
    texts.write_text(MASKED_TEXT, encoding="utf-8")
    records = predictions(ckpt, texts, tmp_path / "predict")
    assert [r["text"] for r in records] == MASKED_TEXT.replace("[MASK]", "<mask>").splitlines()
    assert [len(r["masks"]) for r in records] == [1, 2]
    assert all(len(candidates) == 5 for r in records for candidates in r["masks"])
    return records


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


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run dir, corpus) of the reference run a test file's run properties share: the tiny config's 20 steps on the
    topic corpus, validated every 10, its last checkpoint written."""
    root = tmp_path_factory.mktemp("mlm_reference")
    corpus = root / "corpus.txt"
    corpus.write_text(topic_corpus(200), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        return config_runner(root, patch, tiny_config)("fit", train_path=str(corpus)), corpus
