"""Text classification from Hugging Face datasets: a Parquet file and a DatasetDict folder with a ClassLabel."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from tests.data.hf_cache import cache_entry
from tests.tasks.text_classification.conftest import labelled_rows
from tetraformer.cli import main
from tetraformer.training.checkpointing.loading import load_task_module

TOPICS = ClassLabel(names=["sport", "money", "food"])  # not sorted: the vocabulary keeps the dataset's order


def topic_rows(n: int, seed: int) -> Dataset:
    """The keyword fixture with its labels as ClassLabel ids."""
    rows = labelled_rows(n, seed)
    features = Features({"text": Value("string"), "topic": TOPICS})
    return Dataset.from_dict(
        {"text": [r["text"] for r in rows], "topic": [TOPICS.str2int(r["label"]) for r in rows]}, features
    )


@pytest.mark.slow
def test_fit_from_parquet_and_predict_from_a_dataset_dict(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """The ClassLabel's names are the label vocabulary in its order; predictions name labels, never ids."""
    train = tmp_path / "train.parquet"
    topic_rows(120, 0).to_parquet(str(train))
    saved = tmp_path / "saved"
    DatasetDict({"validation": topic_rows(30, 1), "test": topic_rows(6, 2)}).save_to_disk(str(saved))
    run = run_cli(
        "fit", "--trainer.max_steps", "3", train_path=str(train), val_path=str(saved), label_field="topic"
    )  # val_path reads the DatasetDict's validation split
    ckpt = run / "checkpoints" / "last.ckpt"
    assert load_task_module(ckpt).label_names() == TOPICS.names
    main(
        [
            "predict",
            "--ckpt_path",
            str(ckpt),
            "--data.predict_path",
            str(saved),  # its test split
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(tmp_path / "p"),
        ]
    )
    written = tmp_path / "p" / "eval" / "predict-1" / "predictions.jsonl"
    out = [json.loads(line) for line in written.read_text().splitlines()]
    assert len(out) == 6
    assert all(o["predicted"] in TOPICS.names and o["topic"] in TOPICS.names for o in out)


@pytest.mark.slow
def test_fit_from_a_cached_dataset_by_name(
    run_cli: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hf:NAME reads the local cache offline; --data.split picks the training split, val_path gets validation."""
    cache_entry({"full": topic_rows(60, 0), "validation": topic_rows(20, 1)}, "topics", tmp_path, monkeypatch)
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "2",
        train_path="hf:topics",
        val_path="hf:topics",
        split="full",
        label_field="topic",
    )
    assert load_task_module(run / "checkpoints" / "last.ckpt").label_names() == TOPICS.names


@pytest.mark.slow
def test_a_name_not_in_the_cache_is_one_error_line(
    run_cli: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No download is tried: the error says where it looked, on one line, exit code 2."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty"))
    with pytest.raises(SystemExit) as stop:
        run_cli("fit", train_path="hf:ag_news", label_field="topic")
    assert stop.value.code == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert line.startswith("error: hf:ag_news: not in the local Hugging Face datasets cache (looked in ")
