"""Language modelling from a Parquet text column: tokenized into a store keyed on the Parquet file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from datasets import Dataset

from tests.cli_runner import last_metrics
from tests.tasks.language_modeling.conftest import TEXT


@pytest.mark.slow
def test_fit_from_a_parquet_text_column(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """Each row's `content` is a document; the store's key names the Parquet file, so an edit rebuilds it."""
    corpus = tmp_path / "corpus.parquet"
    Dataset.from_dict({"content": [TEXT] * 12, "id": list(range(12))}).to_parquet(str(corpus))
    stores = tmp_path / "stores"
    run = run_cli(
        "fit", "--trainer.max_steps", "3", train_path=str(corpus), text_field="content", cache_dir=str(stores)
    )
    assert "val/loss" in last_metrics(run)
    (manifest,) = stores.glob("lm-train-*/manifest.json")
    key = json.loads(manifest.read_text(encoding="utf-8"))["key"]
    assert [Path(f[0]) for f in key["files"]] == [corpus.resolve()] and key["text_field"] == "content"
