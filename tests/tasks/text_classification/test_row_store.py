"""The row store behind the datamodule: a second setup tokenizes nothing, another tokenizer rebuilds (logged), and
batches are what tokenizing the records directly gives, whichever vocabulary encodes the labels."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tasks.text_classification import data as data_module
from tasks.text_classification.data import TextClassificationData
from tests.tasks.stored_rows import all_batches, assert_same_batches, refuse, stamps, store_names
from tests.tasks.text_classification.conftest import labelled_rows, write_csv
from tetraformer.data import DataError, LabelVocabulary, load_tokenizer, train_tokenizer
from tetraformer.data import store as row_store_module
from tetraformer.data.spec import DataSpec


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Train and test CSVs of the keyword fixture, and a WordPiece tokenizer of the training text."""
    found = {"train": write_csv(tmp_path / "train.csv", labelled_rows(50, 0))}
    found["test"] = write_csv(tmp_path / "test.csv", labelled_rows(12, 1))
    train_tokenizer([found["train"]], "wordpiece", 100, tmp_path / "tok")
    found["tokenizer"] = tmp_path / "tok"
    return found


def datamodule(files: dict[str, Path], cache: Path, **options: Any) -> TextClassificationData:
    """A datamodule on the fixture files with its stores under `cache`."""
    paths = {"train_path": str(files["train"]), "test_path": str(files["test"]), "predict_path": str(files["test"])}
    options = {"tokenizer": str(files["tokenizer"]), "batch_size": 8, "max_length": 12, **paths, **options}
    return TextClassificationData(cache_dir=str(cache), **options)


def test_a_second_setup_reuses_the_stores_and_tokenizes_nothing(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first = all_batches(datamodule(files, tmp_path / "cache"), "fit", "test", "predict")
    names = [f"text_classification-{split}" for split in ("predict", "test", "train")]
    assert store_names(tmp_path / "cache") == names
    built = stamps(tmp_path / "cache")
    calls = []
    tokenizer = load_tokenizer(files["tokenizer"])
    monkeypatch.setattr(type(tokenizer), "__call__", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(data_module, "tokenize_rows", refuse)
    with caplog.at_level(logging.INFO):
        second = all_batches(datamodule(files, tmp_path / "cache"), "fit", "test", "predict")
    assert calls == [] and caplog.text.count("reusing the row store") == 3
    assert stamps(tmp_path / "cache") == built
    assert_same_batches(first, second)


def test_another_tokenizer_or_max_length_rebuilds_and_says_why(
    files: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    datamodule(files, tmp_path / "cache").setup("fit")
    train_tokenizer([files["test"]], "wordpiece", 80, tmp_path / "other")
    with caplog.at_level(logging.INFO):
        datamodule(files, tmp_path / "cache", tokenizer=str(tmp_path / "other")).setup("fit")
        datamodule(files, tmp_path / "cache", max_length=16).setup("fit")
    built = [r.getMessage() for r in caplog.records if r.getMessage().startswith("building the row store")]
    assert len(built) == 2 and "tokenizer changed since text_classification-train-" in built[0]
    assert "max_length changed since" in built[1]


def test_batches_are_the_direct_tokenization_of_the_records(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buckets = []
    monkeypatch.setattr(data_module, "LengthBuckets", lambda lengths, *args: buckets.append(lengths))
    data = datamodule(files, tmp_path / "cache", bucket=True, num_proc=2)
    data.setup("fit")
    data.setup("test")
    rows = labelled_rows(12, 1)
    tokenizer = load_tokenizer(files["tokenizer"])
    encoded = tokenizer([r["text"] for r in rows], truncation=True, max_length=12)
    names = sorted({r["label"] for r in labelled_rows(50, 0)})
    batch = data.collate(list(data.datasets["test"]))
    expected = data.collate([{"input_ids": ids, "token_type_ids": [0] * len(ids)} for ids in encoded["input_ids"]])
    assert torch.equal(batch["input_ids"], expected["input_ids"])
    assert torch.equal(batch["attention_mask"], expected["attention_mask"])
    train = data.datasets["train"]
    assert batch["labels"].tolist() == [names.index(r["label"]) for r in rows]
    data.train_dataloader()
    assert buckets == [[len(r["input_ids"]) for r in train]]  # bucket lengths read from the store's column


def test_a_checkpoints_vocabulary_wins_and_an_unknown_label_names_its_row(
    files: dict[str, Path], tmp_path: Path
) -> None:
    data = datamodule(files, tmp_path / "cache")
    data.setup("fit")  # the store is built with the training vocabulary in use
    theirs = LabelVocabulary(["sport", "money", "food"])
    evaluated = datamodule(files, tmp_path / "cache")
    evaluated.use_spec(DataSpec(labels=theirs))
    evaluated.setup("test")
    rows = labelled_rows(12, 1)
    assert evaluated.collate(list(evaluated.datasets["test"]))["labels"].tolist() == [
        theirs.names.index(r["label"]) for r in rows
    ]
    narrow = datamodule(files, tmp_path / "cache")
    narrow.use_spec(DataSpec(labels=LabelVocabulary(["sport"])))
    first_other = next(i for i, r in enumerate(rows) if r["label"] != "sport")
    with pytest.raises(DataError, match=rf"test\.csv:{first_other + 2}: unknown label '{rows[first_other]['label']}'"):
        narrow.setup("test")


def test_other_ranks_wait_for_the_store_and_map_it(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waited: list[Path] = []

    def wait(folder: Path, **options: Any) -> Any:
        waited.append(folder)
        raise TimeoutError("still building")

    monkeypatch.setattr(row_store_module, "wait_for_store", wait)
    rank_one = datamodule(files, tmp_path / "cache")
    rank_one.trainer = SimpleNamespace(local_rank=1)  # not the rank that builds: it waits, it never tokenizes
    with pytest.raises(TimeoutError):
        rank_one.setup("fit")
    assert [p.name.rsplit("-", 1)[0] for p in waited] == ["text_classification-train"] and not waited[0].exists()
    monkeypatch.undo()
    datamodule(files, tmp_path / "cache").setup("fit")  # local rank 0 (or prepare_data) builds
    monkeypatch.setattr(data_module, "tokenize_rows", refuse)
    rank_one = datamodule(files, tmp_path / "cache")
    rank_one.trainer = SimpleNamespace(local_rank=1)
    rank_one.setup("fit")
    assert len(rank_one.datasets["train"]) + len(rank_one.datasets["val"]) == 50


def test_prepare_builds_the_stores_that_fit_and_validate_reuse(
    run_cli: Callable[..., Path],
    splits: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    options: dict[str, Any] = {
        "train_path": str(splits["train"]),
        "val_path": str(splits["val"]),
        "cache_dir": str(tmp_path / "s"),
    }
    run_cli("prepare", **options)
    stores = sorted(p for p in (tmp_path / "s").iterdir() if not p.name.startswith("."))
    assert store_names(tmp_path / "s") == ["text_classification-train", "text_classification-val"]
    printed = capsys.readouterr().out
    assert f"train: {stores[0]} (" in printed and "240 rows)" in printed
    monkeypatch.setattr(data_module, "tokenize_rows", refuse)  # neither the fit nor the validation tokenizes
    run = run_cli("fit", "--trainer.max_steps", "2", **options)
    run_cli("validate", "--ckpt_path", str(run / "checkpoints" / "last.ckpt"), **options)
    assert sorted(p for p in (tmp_path / "s").iterdir() if not p.name.startswith(".")) == stores
