"""The masked-LM row stores: a second setup tokenizes nothing, a held-out share is keyed by its fraction and seed,
and rows are the in-memory packing of the documents (with next-sentence pairs too)."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from tasks.masked_lm import data as data_module
from tasks.masked_lm.data import MaskedLMData
from tasks.masked_lm.segments import pair_rows, single_rows, tokenize_documents
from tests.tasks.masked_lm.conftest import topic_corpus
from tests.tasks.stored_rows import all_batches, assert_same_batches, refuse, stamps, store_names
from tetraformer.data import load_tokenizer, read_text, train_tokenizer, train_val_split


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Train and test corpora of topic documents, and a WordPiece tokenizer of the training one."""
    found = {"train": tmp_path / "train.txt", "test": tmp_path / "test.txt"}
    found["train"].write_text(topic_corpus(30, 0), encoding="utf-8")
    found["test"].write_text(topic_corpus(6, 1), encoding="utf-8")
    train_tokenizer([found["train"]], "wordpiece", 80, tmp_path / "tok")
    found["tokenizer"] = tmp_path / "tok"
    return found


def datamodule(files: dict[str, Path], cache: Path, **options: Any) -> MaskedLMData:
    """A masked-LM datamodule on the fixture files (rows of 16 tokens) with its stores under `cache`."""
    paths = {"train_path": str(files["train"]), "test_path": str(files["test"])}
    options = {"tokenizer": str(files["tokenizer"]), "batch_size": 4, "max_length": 16, **paths, **options}
    return MaskedLMData(cache_dir=str(cache), **options)


@pytest.mark.parametrize("next_sentence", [False, True])
def test_a_second_setup_reuses_the_stores_and_tokenizes_nothing(
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    next_sentence: bool,
) -> None:
    torch.manual_seed(0)  # training masks are drawn from the global generator, here the same for both runs
    first = all_batches(datamodule(files, tmp_path / "cache", next_sentence=next_sentence), "fit", "test")
    assert store_names(tmp_path / "cache") == ["masked_lm-test", "masked_lm-train", "masked_lm-val"]
    built = stamps(tmp_path / "cache")
    calls = []
    monkeypatch.setattr(type(load_tokenizer(files["tokenizer"])), "__call__", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(data_module, "tokenize_rows", refuse)
    torch.manual_seed(0)
    with caplog.at_level(logging.INFO):
        second = all_batches(datamodule(files, tmp_path / "cache", next_sentence=next_sentence), "fit", "test")
    assert calls == [] and caplog.text.count("reusing the row store") == 3
    assert stamps(tmp_path / "cache") == built
    assert_same_batches(first, second)


def test_the_held_out_share_is_keyed_by_fraction_and_seed(
    files: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    datamodule(files, tmp_path / "cache").setup("fit")
    with caplog.at_level(logging.INFO):
        other = datamodule(files, tmp_path / "cache", val_fraction=0.3)
        other.setup("fit")
    built = [r.getMessage() for r in caplog.records if r.getMessage().startswith("building the row store")]
    assert len(built) == 2 and all("held_out changed since" in line for line in built)
    _, held_out = train_val_split(read_text(files["train"], documents="paragraph"), 0.3, other.seed)
    tokenizer = other.tokenizer
    expected = single_rows(
        tokenize_documents(held_out["text"], tokenizer, 14), tokenizer.cls_token_id, tokenizer.sep_token_id, 16
    )
    assert [{k: v for k, v in r.items() if k != "mask_seed"} for r in other.datasets["val"]] == expected


def test_rows_are_the_packing_of_the_documents(files: dict[str, Path], tmp_path: Path) -> None:
    data = datamodule(files, tmp_path / "cache", next_sentence=True, num_proc=2)
    data.setup("test")
    tokenizer = load_tokenizer(files["tokenizer"])
    documents = tokenize_documents(read_text(files["test"], documents="paragraph")["text"], tokenizer, 13)
    rng = random.Random(f"{data.seed}-test")
    expected = pair_rows(documents, tokenizer.cls_token_id, tokenizer.sep_token_id, 16, rng)
    rows = list(data.datasets["test"])
    assert [{k: v for k, v in r.items() if k != "mask_seed"} for r in rows] == expected
    assert [r["mask_seed"] for r in rows] == [data.seed + i for i in range(len(rows))]
