"""prepare_run_tokenizer: the number of reserved sentinels is a recorded setting; changing it retrains."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tetraformer.data import DataError, load_tokenizer
from tetraformer.data.run_tokenizer import RECORD, prepare_run_tokenizer
from tetraformer.data.tokenizer import sentinel_ids


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "train.txt"
    path.write_text("the quick brown fox jumps over the lazy dog\n" * 10, encoding="utf-8")
    return path


def prepare(directory: Path, corpus: Path, extra_ids: int = 0) -> dict:
    """Prepare a char tokenizer in `directory`; its training record."""
    prepare_run_tokenizer(directory, [corpus], "char", 60, "text", "utf-8", extra_ids=extra_ids)
    return json.loads((directory / RECORD).read_text())


def test_extra_ids_are_recorded_and_reserved(tmp_path: Path, corpus: Path) -> None:
    record = prepare(tmp_path / "tok", corpus, extra_ids=4)
    assert record["extra_ids"] == 4
    assert len(sentinel_ids(load_tokenizer(tmp_path / "tok"))) == 4
    assert "extra_ids" not in prepare(tmp_path / "plain", corpus)  # records without sentinels keep their form


@pytest.mark.parametrize(("before", "after"), [(0, 4), (4, 8), (4, 0)])
def test_changed_extra_ids_retrain(
    before: int, after: int, tmp_path: Path, corpus: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """More, fewer or no sentinels than recorded retrain the tokenizer, naming extra_ids as the change."""
    caplog.set_level(logging.WARNING)
    prepare(tmp_path, corpus, before)
    prepare(tmp_path, corpus, after)
    assert "extra_ids changed since it was trained" in caplog.text
    if after:
        assert sentinel_ids(load_tokenizer(tmp_path)) == list(range(5, 5 + after))
    else:
        with pytest.raises(DataError, match="has 0 sentinel tokens"):
            sentinel_ids(load_tokenizer(tmp_path))


def test_same_extra_ids_reuse_the_tokenizer(tmp_path: Path, corpus: Path) -> None:
    prepare(tmp_path, corpus, 4)
    written = (tmp_path / "tokenizer.json").stat().st_mtime_ns
    prepare(tmp_path, corpus, 4)
    assert (tmp_path / "tokenizer.json").stat().st_mtime_ns == written


@pytest.mark.parametrize(
    ("option", "key", "value"),
    [("chinese_chars", "tokenize_chinese_chars", False), ("zero_digits", "zero_digits", True)],
)
def test_normaliser_settings_are_recorded_and_retrain(
    tmp_path: Path, corpus: Path, caplog: pytest.LogCaptureFixture, option: str, key: str, value: bool
) -> None:
    """A setting away from its default is recorded (the default is not: older records match) and a change
    retrains: kanji kept in their words, digits read as 0."""
    caplog.set_level(logging.WARNING)
    prepare_run_tokenizer(tmp_path, [corpus], "wordpiece", 60, "text", "utf-8")
    assert key not in json.loads((tmp_path / RECORD).read_text())
    prepare_run_tokenizer(tmp_path, [corpus], "wordpiece", 60, "text", "utf-8", **{option: value})
    assert json.loads((tmp_path / RECORD).read_text())[key] is value
    assert f"{key} changed since it was trained" in caplog.text
