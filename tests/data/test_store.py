"""Stores of a task's rows: built once, reused by key (no tokenization), rebuilt and logged on a key change, whole
or not at all; StoreRows reads rows lazily; LabelColumn encodes raw labels with file:line errors."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tetraformer.data import DataError, LabelVocabulary, read_records, train_tokenizer
from tetraformer.data.label_columns import LabelColumn
from tetraformer.data.records import LINE_COLUMN, SOURCE_COLUMN
from tetraformer.data.store import (
    ARROW,
    MANIFEST,
    ROWS,
    open_store,
    prepare_store,
    store_key,
    tokenize_rows,
    wait_for_store,
)
from tetraformer.data.store_rows import PositionSeed, StoreRows
from tetraformer.errors import ConfigError

TEXTS = ["the cat sat", "on the mat", "a dog barked twice", "the end", "cats and dogs", "one more line here"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A small WordPiece tokenizer of the texts."""
    corpus = tmp_path_factory.mktemp("corpus") / "c.txt"
    corpus.write_text("\n".join(TEXTS * 5) + "\n", encoding="utf-8")
    return train_tokenizer(corpus, "wordpiece", 120, tmp_path_factory.mktemp("tok"))


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """A JSONL file of texts and labels (the last one unknown to a vocabulary of a and b)."""
    path = tmp_path / "rows.jsonl"
    labels = ["a", "b", "a", "b", "a", "z"]
    lines = [f'{{"text": "{text}", "label": "{label}"}}\n' for text, label in zip(TEXTS, labels, strict=True)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


class Encode:
    """A picklable batch encoder: ids of the text (refusing 'boom' at its row), the label as JSON, the location."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        for text, source, line in zip(batch["text"], batch[SOURCE_COLUMN], batch[LINE_COLUMN], strict=True):
            if text == "boom":
                raise DataError("boom text", source, line)
        return {
            "input_ids": self.tokenizer(batch["text"])["input_ids"],
            "label": [f'"{y}"' for y in batch["label"]],
            SOURCE_COLUMN: batch[SOURCE_COLUMN],
            LINE_COLUMN: batch[LINE_COLUMN],
        }


def store(files: Path, tokenizer: Any, cache: Path, num_proc: int = 1, **options: Any) -> Any:
    """The store of a records file, tokenized with Encode (its build counted in `store.builds`)."""

    def build(scratch: Path) -> dict[str, Any]:
        built.append(scratch)
        return {ROWS: tokenize_rows(read_records(files), Encode(tokenizer), scratch, num_proc)}

    built: list[Path] = []
    found = row_store([files], tokenizer, {"max_length": 8, **options}, build, cache)
    found.manifest["builds"] = len(built)
    return found


def row_store(files: list[Path], tokenizer: Any, options: dict[str, Any], build: Any, cache: Path, **how: Any) -> Any:
    """The store `task-train` of the files' rows (ids checked against the tokenizer)."""
    key = store_key(files, tokenizer, options)
    return prepare_store("task-train", key, build, cache, vocab_size=len(tokenizer), id_columns=["input_ids"], **how)


def test_rows_are_the_tokenizers_and_a_second_open_reuses_them(
    records: Path, tokenizer: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = store(records, tokenizer, tmp_path / "cache")
    rows = StoreRows(first.table())
    assert [r["input_ids"] for r in rows] == tokenizer(TEXTS)["input_ids"]
    assert [r[LINE_COLUMN] for r in rows] == [1, 2, 3, 4, 5, 6] and first.n_rows == 6
    stamp = {p: p.stat().st_mtime_ns for p in first.path.rglob("*")}
    with caplog.at_level(logging.INFO):
        second = store(records, tokenizer, tmp_path / "cache")
    assert second.manifest["builds"] == 0 and second.path == first.path
    assert {p: p.stat().st_mtime_ns for p in second.path.rglob("*")} == stamp  # the store is untouched
    assert f"reusing the row store {first.path} (6 rows)" in caplog.text


@pytest.mark.parametrize("key", ["files", "tokenizer", "max_length"])
def test_each_key_change_rebuilds_and_says_which(
    records: Path, tokenizer: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, key: str
) -> None:
    first = store(records, tokenizer, tmp_path / "cache")
    other = tokenizer
    if key == "files":
        records.write_text(records.read_text(encoding="utf-8") + '{"text": "new", "label": "a"}\n', encoding="utf-8")
    if key == "tokenizer":
        corpus = tmp_path / "other.txt"
        corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
        other = train_tokenizer(corpus, "bpe", 300, tmp_path / "bpe")
    with caplog.at_level(logging.INFO):
        second = store(records, other, tmp_path / "cache", max_length=9 if key == "max_length" else 8)
    assert second.manifest["builds"] == 1 and second.path != first.path
    assert f"building the row store {second.path}: {key} changed since {first.path.name}" in caplog.text


def test_parallel_tokenization_gives_the_same_rows(records: Path, tokenizer: Any, tmp_path: Path) -> None:
    one = StoreRows(store(records, tokenizer, tmp_path / "one").table())
    two = StoreRows(store(records, tokenizer, tmp_path / "two", num_proc=2).table())
    assert list(one) == list(two)


def test_a_failed_build_is_one_line_and_leaves_nothing(records: Path, tokenizer: Any, tmp_path: Path) -> None:
    records.write_text(records.read_text(encoding="utf-8") + '{"text": "boom", "label": "a"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"rows\.jsonl:7: boom text$"):
        store(records, tokenizer, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []  # no store, no partial folder


# The same with two tokenizing processes, in an interpreter of its own, as a user's fit has it: a pytest-xdist worker
# (its execnet thread, and whatever earlier tests left) once hung here for 5 minutes, joining a map worker that did not
# end on SIGTERM (1 of 6 full runs; not reproduced in 40 tries outside a worker).
FAILED_BUILD = """
import sys
from pathlib import Path
from tests.data.test_store import TEXTS, store
from tetraformer.data import DataError, train_tokenizer
root = Path(sys.argv[1])
(root / "c.txt").write_text("\\n".join(TEXTS * 5) + "\\n", encoding="utf-8")
tokenizer = train_tokenizer(root / "c.txt", "wordpiece", 120, root / "tok")
try:
    store(Path(sys.argv[2]), tokenizer, root / "cache", num_proc=2)
except DataError as err:
    print(err)
print(sorted(p.name for p in (root / "cache").iterdir()))
"""


@pytest.mark.slow  # a child interpreter
def test_a_failed_build_on_two_processes_is_one_line_and_leaves_nothing(records: Path, tmp_path: Path) -> None:
    records.write_text(records.read_text(encoding="utf-8") + '{"text": "boom", "label": "a"}\n', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", FAILED_BUILD, str(tmp_path), str(records)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said, left = done.stdout.splitlines()
    assert said.endswith("rows.jsonl:7: boom text") and left == "[]", done.stdout  # no store, no partial folder


def test_a_damaged_store_is_built_again(
    records: Path, tokenizer: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = store(records, tokenizer, tmp_path / "cache")
    (first.path / f"{ROWS}{ARROW}").unlink()
    assert open_store(first.path) is None
    with caplog.at_level(logging.WARNING):
        second = store(records, tokenizer, tmp_path / "cache")
    assert second.manifest["builds"] == 1 and "is damaged" in caplog.text
    assert len(StoreRows(second.table())) == 6


def test_other_ranks_wait_for_the_store(records: Path, tokenizer: Any, tmp_path: Path) -> None:
    built = store(records, tokenizer, tmp_path / "cache")
    assert wait_for_store(built.path, timeout_s=0).path == built.path
    options = {"max_length": 8}
    waited = row_store([records], tokenizer, options, _refuse, tmp_path / "cache", build_here=False)
    assert waited.path == built.path
    with pytest.raises(DataError, match="no store appeared in .* within 0 s"):
        wait_for_store(tmp_path / "cache" / "missing", timeout_s=0)
    assert (built.path / MANIFEST).is_file()


def test_an_unwritable_cache_is_a_config_error(records: Path, tokenizer: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"--data\.cache_dir=.*file/cache.*: cannot write there"):
        store(records, tokenizer, blocker / "cache")


def test_store_rows_gather_select_hooks_and_lengths(records: Path, tokenizer: Any, tmp_path: Path) -> None:
    rows = StoreRows(store(records, tokenizer, tmp_path).table())
    subset = rows.select([4, 1]).with_hook("seed", PositionSeed("seed", 10))
    assert [r[LINE_COLUMN] for r in subset.__getitems__([0, 1])] == [5, 2]
    assert [r["seed"] for r in subset] == [10, 11]
    assert subset.lengths().tolist() == [len(tokenizer(TEXTS[4])["input_ids"]), len(tokenizer(TEXTS[1])["input_ids"])]
    assert subset.memo is rows.memo and "seed" not in rows[0]


def test_label_column_encodes_with_any_vocabulary_and_names_the_first_unknown_row(
    records: Path, tokenizer: Any, tmp_path: Path
) -> None:
    rows = StoreRows(store(records, tokenizer, tmp_path).table())
    column = LabelColumn.of(rows.table.data.column("label"), rows.location)
    first_five = np.arange(5)
    assert column.vocabulary(first_five).names == ["a", "b"]
    ids = column.encode(LabelVocabulary(["b", "a"]), first_five)  # another order (a checkpoint's) wins
    assert [ids[i] for i in range(5)] == [1, 0, 1, 0, 1] and ids.counts(first_five, 2) == [2, 3]
    with pytest.raises(DataError, match=r"rows\.jsonl:6: unknown label 'z'; known labels: 'a', 'b'"):
        column.encode(LabelVocabulary(["a", "b"]), rows.indices)


def test_multi_hot_labels_and_counts(tmp_path: Path) -> None:
    from datasets import Dataset

    table = Dataset.from_dict({"label": ['["a", "b"]', '["b"]', '["a", "b"]', "[]"]})
    column = LabelColumn.of(table.data.column("label"), lambda i: ("f.jsonl", i + 1))
    vocabulary = column.vocabulary(np.arange(4), multi_label=True)
    ids = column.encode(vocabulary, np.arange(4))
    assert torch.equal(ids[0], torch.tensor([1, 1])) and torch.equal(ids[3], torch.tensor([0, 0]))
    assert ids.counts(np.arange(4), 2) == [2, 3]
    ids[0][0] = 5  # a row's tensor is its own
    assert torch.equal(ids[2], torch.tensor([1, 1]))


def _refuse(*args: Any) -> Any:
    raise AssertionError("built instead of waiting")
