"""Every task's fit logs throughput and MFU (against the measured peak, the default) to metrics.csv and its summary."""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.data.quadrant_images import write_folder
from tests.tasks.image_classification.conftest import tiny_config as image_config
from tests.tasks.language_modeling.conftest import TEXT
from tests.tasks.language_modeling.conftest import tiny_config as lm_config
from tests.tasks.masked_lm.conftest import tiny_config as mlm_config
from tests.tasks.masked_lm.conftest import topic_corpus
from tests.tasks.seq2seq.conftest import reversal_pairs
from tests.tasks.seq2seq.conftest import tiny_config as seq2seq_config
from tests.tasks.seq2seq.conftest import write_jsonl as write_pairs
from tests.tasks.text_classification.conftest import labelled_rows, write_csv
from tests.tasks.text_classification.conftest import tiny_config as text_config
from tests.tasks.token_classification.conftest import tagged_sentences, write_conll
from tests.tasks.token_classification.conftest import tiny_config as tagger_config
from tests.training.wandb_records import summary_items
from tetraformer.cli import main

pytestmark = pytest.mark.slow  # every test here runs the CLI


def write_text(path: Path, text: str) -> Path:
    """A text file."""
    path.write_text(text, encoding="utf-8")
    return path


# task -> (its tests' tiny config, data options given the data folder)
TASKS: dict[str, tuple[Callable[..., dict], Callable[[Path], dict]]] = {
    "text_classification": (text_config, lambda d: {"train_path": str(write_csv(d / "t.csv", labelled_rows(64, 0)))}),
    "token_classification": (
        tagger_config,
        lambda d: {"train_path": str(write_conll(d / "t.conll", tagged_sentences(64, 0)))},
    ),
    "masked_lm": (mlm_config, lambda d: {"train_path": str(write_text(d / "t.txt", topic_corpus(40)))}),
    "language_modeling": (
        lm_config,
        lambda d: {"train_path": str(write_text(d / "t.txt", TEXT * 12)), "documents": "line"},
    ),
    "seq2seq": (seq2seq_config, lambda d: {"train_path": str(write_pairs(d / "t.jsonl", reversal_pairs(64)))}),
    "image_classification": (image_config, lambda d: {"train_path": str(write_folder(d / "images", 48, 0))}),
}
COLUMNS = ("train/tokens_per_s", "train/samples_per_s", "train/mfu")


def metrics_rows(run: Path) -> list[dict[str, str]]:
    """Rows of the run's metrics.csv."""
    with next(run.glob("logs/version_*/metrics.csv")).open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("task", list(TASKS))
def test_fit_logs_throughput_and_mfu(
    task: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Per-interval tokens/s, samples/s and 0 < MFU < 1 (CPU, measured peak); the run's means and the peak at the
    end, also in the one summary line logged when training ends."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    build, data = TASKS[task]
    config = tmp_path / "fit.yaml"
    config.write_text(yaml.safe_dump(build(tmp_path / "run", **data(tmp_path))))
    with caplog.at_level(logging.INFO, logger="tetraformer.training.callbacks.throughput"):
        main(["fit", "-c", str(config), "--trainer.max_steps", "3", "--trainer.limit_val_batches", "0"])
    rows = metrics_rows(tmp_path / "run")
    logged = [r for r in rows if r.get("train/mfu")]
    assert logged and all(float(r[c]) > 0 for r in logged for c in COLUMNS)
    assert all(float(r["train/mfu"]) < 1 for r in logged)
    final = next(r for r in rows if r.get("train/mean_mfu"))
    assert 0 < float(final["train/mean_mfu"]) < 1 and float(final["train/peak_tflops"]) > 0
    assert float(final["train/mean_tokens_per_s"]) > 0 and float(final["train/mean_samples_per_s"]) > 0
    assert "measured peak" in caplog.text and "MFU" in caplog.text


def lm_fit(tmp_path: Path, *options: str) -> None:
    """A 3-step language-model fit into tmp_path/run, without validation, with more CLI options."""
    build, data = TASKS["language_modeling"]
    config = tmp_path / "fit.yaml"
    config.write_text(yaml.safe_dump(build(tmp_path / "run", **data(tmp_path))))
    main(["fit", "-c", str(config), "--trainer.max_steps", "3", "--trainer.limit_val_batches", "0", *options])


def test_wandb_summary_holds_the_means_and_the_peak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An offline W&B run's summary gets the run's mean rates, MFU, the peak and where the peak came from."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    lm_fit(tmp_path, "--run.wandb", "offline", "--run.peak_tflops", "2.5")
    summary = summary_items(next((tmp_path / "run").glob("wandb/offline-run-*/run-*.wandb")))
    assert summary["train/peak_tflops"] == 2.5 and summary["train/peak_source"] == "configured"
    assert 0 < summary["train/mean_mfu"] < 1 and summary["train/mean_tokens_per_s"] > 0


def test_no_mfu_with_a_null_peak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--run.peak_tflops null` turns MFU off; throughput is still logged."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    lm_fit(tmp_path, "--run.peak_tflops", "null")
    rows = metrics_rows(tmp_path / "run")
    assert any(r.get("train/tokens_per_s") for r in rows) and any(r.get("train/mean_tokens_per_s") for r in rows)
    assert not any(r.get("train/mfu") or r.get("train/mean_mfu") or r.get("train/peak_tflops") for r in rows)
