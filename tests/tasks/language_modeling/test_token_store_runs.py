"""`tetraformer prepare` builds the stores a fit reads; the fit, a resume and a validation reuse them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tetraformer.data import corpus_store as corpus_module


def test_prepare_then_fit_reuses_the_store(
    run_cli: Callable[..., Path],
    text_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    options: dict[str, Any] = {"train_path": str(text_file), "documents": "line", "cache_dir": str(tmp_path / "s")}
    run_cli("prepare", **options)
    stores = [p for p in (tmp_path / "s").iterdir() if not p.name.startswith(".")]
    assert [p.name.split("-")[:2] for p in stores] == [["lm", "train"]]
    assert f"train: {stores[0]} (" in capsys.readouterr().out
    monkeypatch.setattr(corpus_module, "write_corpus", _refuse)  # the fit must not tokenize again
    run = run_cli("fit", "--trainer.max_steps", "2", **options)
    assert (run / "checkpoints" / "last.ckpt").is_file()
    run_cli("fit", "--trainer.max_steps", "4", "--ckpt_path", "last", **options)
    run_cli("validate", "--ckpt_path", str(run / "checkpoints" / "last.ckpt"), **options)  # the checkpoint's tokenizer


def _refuse(*args: Any) -> Any:
    raise AssertionError("tokenized again instead of reusing the store")
