"""RUN_DIR/tokenizer is reused only when it was trained with the run's settings and training files (a resume reusing
it: test_run_dir.py)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tasks.language_modeling.conftest import reference_corpus
from tetraformer.data.run_tokenizer import RECORD


def fit_once(run_cli: Callable[..., Path], text_file: Path, *args: str, **data: object) -> Path:
    """A one-step fit (`--trainer.fast_dev_run`: a train and a val batch) of the tiny config on `text_file`; returns
    the run's tokenizer folder, which it asserts holds tokenizer.json."""
    run = run_cli("fit", "--trainer.fast_dev_run", "1", *args, train_path=str(text_file), documents="line", **data)
    assert (run / "tokenizer" / "tokenizer.json").is_file()
    return run / "tokenizer"


def trained_at(tokenizer: Path) -> int:
    """When tokenizer.json was last written."""
    return (tokenizer / "tokenizer.json").stat().st_mtime_ns


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"tokenizer_type": "bpe", "vocab_size": 300}, "tokenizer_type, vocab_size"),
        ({"vocab_size": 50}, "vocab_size"),
        ({"text_field": "body"}, "field"),
    ],
)
def test_changed_settings_retrain(
    change: dict,
    reason: str,
    run_copy: Path,
    trained_run: Path,
    run_cli: Callable[..., Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tokenizer type, vocabulary size or read option other than the recorded ones (the reference run's: char, the
    default 8000) retrains it, saying why."""
    caplog.set_level(logging.INFO)
    before = json.loads((run_copy / "tokenizer" / RECORD).read_text())
    tokenizer = fit_once(run_cli, reference_corpus(trained_run), **change)
    after = json.loads((tokenizer / RECORD).read_text())
    assert f"{reason} changed since it was trained" in caplog.text
    assert after != before and after["vocab_size"] == change.get("vocab_size", 8000)


def test_changed_training_file_retrains(
    run_cli: Callable[..., Path], text_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """New text in the training file (its size and mtime) retrains the tokenizer on it."""
    caplog.set_level(logging.INFO)
    tokenizer = fit_once(run_cli, text_file)
    text_file.write_text(text_file.read_text() + "Zounds! Quixotic jazz.\n")
    fit_once(run_cli, text_file)
    assert "files changed since it was trained" in caplog.text
    vocab = json.loads((tokenizer / "tokenizer.json").read_text())["model"]["vocab"]
    assert "Z" in vocab and "Q" in vocab


def test_tokenizer_without_record_is_kept(
    run_cli: Callable[..., Path], text_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tokenizer from before records existed is reused (a resumed run needs its vocabulary), with a warning."""
    tokenizer = fit_once(run_cli, text_file)
    (tokenizer / RECORD).unlink()
    written = trained_at(tokenizer)
    os.utime(text_file)  # even a touched file does not retrain an unrecorded tokenizer
    fit_once(run_cli, text_file, vocab_size=50)
    assert trained_at(tokenizer) == written and f"no {RECORD}" in caplog.text
