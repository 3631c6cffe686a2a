"""The seq2seq row stores: a second setup tokenizes nothing (pairs and span corruption), a changed tokenizer or
mixture prefix rebuilds (logged), and rows are each pair's own tokenization."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tasks.seq2seq import data as data_module
from tasks.seq2seq.data import Seq2SeqData
from tasks.seq2seq.reading import PairFile
from tests.tasks.seq2seq.conftest import reversal_pairs, write_jsonl
from tests.tasks.stored_rows import all_batches, assert_same_batches, refuse, stamps, store_names
from tetraformer.data import load_tokenizer, train_tokenizer


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Train and test pairs, a text corpus, and a unigram tokenizer with sentinels trained on both."""
    found = {"train": write_jsonl(tmp_path / "train.jsonl", reversal_pairs(30, 0))}
    found["test"] = write_jsonl(tmp_path / "test.jsonl", reversal_pairs(8, 1))
    found["text"] = tmp_path / "text.txt"
    found["text"].write_text("".join(p["source"] * 3 + " " + p["target"] + "\n" for p in reversal_pairs(30, 2)))
    train_tokenizer([found["text"]], "unigram", 60, tmp_path / "tok", extra_ids=5)
    found["tokenizer"] = tmp_path / "tok"
    return found


def datamodule(files: dict[str, Path], cache: Path, **options: Any) -> Seq2SeqData:
    """A seq2seq datamodule on the fixture files with its stores under `cache`."""
    paths = {"train_path": str(files["train"]), "test_path": str(files["test"]), "predict_path": str(files["test"])}
    options = {"tokenizer": str(files["tokenizer"]), "batch_size": 4, "max_source_length": 6, **paths, **options}
    return Seq2SeqData(cache_dir=str(cache), **options)


@pytest.mark.parametrize("objective", ["pairs", "span_corruption"])
def test_a_second_setup_reuses_the_stores_and_tokenizes_nothing(
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    objective: str,
) -> None:
    stages = ("fit", "test", "predict") if objective == "pairs" else ("fit", "test")
    texts = {"train_path": str(files["text"]), "test_path": str(files["text"])}
    span = {"objective": objective, "extra_ids": 5, **texts} if objective != "pairs" else {}
    first = all_batches(datamodule(files, tmp_path / "cache", **span), *stages)
    assert store_names(tmp_path / "cache") == sorted(f"seq2seq-{stage}" for stage in ("train", *stages[1:]))
    built = stamps(tmp_path / "cache")
    calls = []
    monkeypatch.setattr(type(load_tokenizer(files["tokenizer"])), "__call__", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(data_module, "tokenize_rows", refuse)
    with caplog.at_level(logging.INFO):
        second = all_batches(datamodule(files, tmp_path / "cache", **span), *stages)
    assert calls == [] and caplog.text.count("reusing the row store") == len(stages)
    assert stamps(tmp_path / "cache") == built
    assert_same_batches(first, second)


def test_another_tokenizer_or_mixture_prefix_rebuilds_and_says_why(
    files: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mixture = [PairFile(str(files["train"]), "a: "), PairFile(str(files["test"]), "b: ")]
    datamodule(files, tmp_path / "cache", mixture=mixture).setup("fit")
    train_tokenizer([files["text"]], "char", 60, tmp_path / "other")
    with caplog.at_level(logging.INFO):
        datamodule(files, tmp_path / "cache", mixture=mixture, tokenizer=str(tmp_path / "other")).setup("fit")
        mixture[1] = PairFile(str(files["test"]), "c: ")
        datamodule(files, tmp_path / "cache", mixture=mixture).setup("fit")
    built = [r.getMessage() for r in caplog.records if r.getMessage().startswith("building the row store")]
    assert len(built) == 2 and "tokenizer changed since seq2seq-train-" in built[0]
    assert "mixture_prefixes changed since" in built[1]


def test_rows_are_each_pairs_own_tokenization(files: dict[str, Path], tmp_path: Path) -> None:
    data = datamodule(files, tmp_path / "cache", num_proc=2, max_source_length=64, source_prefix="rev: ")
    data.setup("test")
    tokenizer = load_tokenizer(files["tokenizer"])
    pairs = reversal_pairs(8, 1)
    rows = list(data.datasets["test"])
    assert [r["input_ids"] for r in rows] == tokenizer(["rev: " + p["source"] for p in pairs])["input_ids"]
    assert [r["source"] for r in rows] == ["rev: " + p["source"] for p in pairs]
    assert [r["record"] for r in rows] == pairs
    assert [r["labels"][-1] for r in rows] == [tokenizer.eos_token_id] * len(pairs)
