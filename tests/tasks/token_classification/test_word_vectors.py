"""--model.word_vectors through the CLI: a tagger whose embedding starts from vectors that tell names apart tags
names it never saw in training; the same tagger started at random cannot. Its checkpoint needs no vectors."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tasks.token_classification.module import TokenClassification
from tests.cli_runner import last_metrics
from tests.tasks.token_classification.conftest import write_conll
from tetraformer.data.tokenizer import train_tokenizer
from tetraformer.data.word_vectors import write_word_vectors

NAMES, FILLER = 40, 40  # words of each kind; half of each are training words, the other half validation's only


def made_up_words(n: int, rng: random.Random) -> list[str]:
    """`n` distinct lower-case words of 5-7 letters."""
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(3))[: rng.randint(5, 7)])
    return sorted(words)


def sentences(names: list[str], filler: list[str], n: int, rng: random.Random) -> list[list[tuple[str, str]]]:
    """Sentences of 4-7 filler words with one name (B-PER) at a random place."""
    out = []
    for _ in range(n):
        words = [(rng.choice(filler), "O") for _ in range(rng.randint(4, 7))]
        words.insert(rng.randint(0, len(words)), (rng.choice(names), "B-PER"))
        out.append(words)
    return out


@pytest.fixture
def unseen_names(tmp_path: Path) -> dict[str, Path]:
    """Train on one half of the names and filler words, validate on the other half; vectors that put names on
    one side of an axis and filler on the other (noise elsewhere); a tokenizer that keeps every word whole."""
    rng = random.Random(0)
    words = made_up_words(NAMES + FILLER, rng)
    rng.shuffle(words)
    names, filler = words[:NAMES], words[NAMES:]
    half_n, half_f = NAMES // 2, FILLER // 2
    train = write_conll(tmp_path / "train.conll", sentences(names[:half_n], filler[:half_f], 200, rng))
    val = write_conll(tmp_path / "val.conll", sentences(names[half_n:], filler[half_f:], 60, rng))
    noise = np.random.default_rng(0).normal(scale=0.5, size=(len(words), 16)).astype(np.float32)
    noise[:, 0] += np.where(np.isin(words, names), 4.0, -4.0)
    write_word_vectors(tmp_path / "vectors", noise, {w: i for i, w in enumerate(words)})
    text = tmp_path / "all_words.txt"
    text.write_text(" ".join(words) + "\n", encoding="utf-8")
    train_tokenizer(str(text), "wordpiece", 1000, tmp_path / "tokenizer")
    return {"train": train, "val": val, "vectors": tmp_path / "vectors", "tokenizer": tmp_path / "tokenizer"}


def assert_loads_without_the_vectors(run: Path, vectors: Path) -> None:
    """The run's last checkpoint loads, vectors option and network whole, after the vectors' files are deleted."""
    checkpoint = next((run / "checkpoints").glob("last*.ckpt"))
    for path in vectors.iterdir():
        path.unlink()
    module = TokenClassification.load_from_checkpoint(checkpoint, weights_only=False)
    assert module.word_vectors is not None and module.net is not None


@pytest.mark.learning
def test_vectors_let_a_tagger_find_unseen_names(
    run_cli: Callable[..., Path], unseen_names: dict[str, Path], tmp_path: Path
) -> None:
    """Validation names are all unseen: started from the vectors (kept frozen, so the seen words cannot drift
    away from the unseen ones) the tagger finds most of them, started at random it finds few; the checkpoint
    loads with the vectors gone."""
    paths = {"train_path": str(unseen_names["train"]), "val_path": str(unseen_names["val"])}
    data = {**paths, "tokenizer": str(unseen_names["tokenizer"])}
    vectors = {"word_vectors": {"path": str(unseen_names["vectors"]), "freeze": True}}
    with_vectors = run_cli("fit", root=tmp_path / "vectors_run", model=vectors, **data)
    at_random = run_cli("fit", root=tmp_path / "random_run", **data)
    found, guessed = last_metrics(with_vectors)["val/entity_f1"], last_metrics(at_random)["val/entity_f1"]
    assert found > 0.8 and guessed < found - 0.4, (found, guessed)
    assert_loads_without_the_vectors(with_vectors, unseen_names["vectors"])


def test_a_checkpoint_started_from_vectors_loads_without_them(
    run_cli: Callable[..., Path], unseen_names: dict[str, Path]
) -> None:
    """A short fit from the vectors writes a checkpoint that loads with the vectors gone."""
    data = {"train_path": str(unseen_names["train"]), "tokenizer": str(unseen_names["tokenizer"])}
    vectors = {"word_vectors": {"path": str(unseen_names["vectors"]), "freeze": True}}
    run = run_cli("fit", "--trainer.max_steps", "2", model=vectors, **data)
    assert_loads_without_the_vectors(run, unseen_names["vectors"])
