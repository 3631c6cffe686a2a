"""RUN_DIR/tokenizer is reused only when it was trained with the run's settings and training files."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tetraformer.data.run_tokenizer import RECORD


def fit_once(run_cli: Callable[..., Path], text_file: Path, *args: str, **data: object) -> Path:
    """A one-step fit (fast_dev_run) of the tiny config on `text_file`; returns the run's tokenizer folder."""
    run = run_cli("fit", "--trainer.fast_dev_run", "1", *args, train_path=str(text_file), documents="line", **data)
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
    change: dict, reason: str, run_cli: Callable[..., Path], text_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tokenizer type, vocabulary size or read option other than the recorded ones retrains it, saying why."""
    caplog.set_level(logging.INFO)
    tokenizer = fit_once(run_cli, text_file)
    before = json.loads((tokenizer / RECORD).read_text())
    fit_once(run_cli, text_file, **change)
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


def test_same_settings_reuse_it_and_resume_works(run_cli: Callable[..., Path], text_file: Path) -> None:
    """The same settings and files reuse the tokenizer as it is; `fit --ckpt_path last` resumes on it."""
    data = {"train_path": str(text_file), "documents": "line"}
    run = run_cli("fit", "--trainer.max_steps", "3", **data)
    written = trained_at(run / "tokenizer")
    run_cli("fit", "--trainer.max_steps", "6", "--ckpt_path", "last", **data)
    assert trained_at(run / "tokenizer") == written


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
