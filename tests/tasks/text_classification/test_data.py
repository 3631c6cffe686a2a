"""The datamodule: segment ids for pairs, multi-label parsing, truncation count, and one-line bad-input errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from tasks.text_classification.data import TextClassificationData
from tests.tasks.text_classification.conftest import labelled_rows, write_csv, write_jsonl
from tetraformer.data import DataError, train_tokenizer


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    """A small WordPiece tokenizer of the fixture text."""
    text = write_csv(tmp_path / "tok.csv", labelled_rows(60, 0))
    train_tokenizer([text], "wordpiece", 100, tmp_path / "tok")
    return tmp_path / "tok"


def data(tokenizer_dir: Path, **options: object) -> TextClassificationData:
    """A datamodule on the fixture tokenizer."""
    return TextClassificationData(tokenizer=str(tokenizer_dir), **options)


def test_pairs_get_segment_ids(tokenizer_dir: Path, tmp_path: Path) -> None:
    """`<s> a </s> b </s>`: segment 0 up to the first separator, 1 after it; batches pad to the longest row."""
    path = write_jsonl(
        tmp_path / "pairs.jsonl",
        [{"q": "the news", "a": "bank and more", "label": "x"}, {"q": "soup", "a": "a", "label": "y"}],
    )
    module = data(tokenizer_dir, train_path=str(path), val_path=str(path), text_field="q", text_pair_field="a")
    module.setup("fit")
    row = module.datasets["train"][0]
    tokens = module.tokenizer.convert_ids_to_tokens(row["input_ids"])
    assert tokens == ["<s>", "the", "news", "</s>", "bank", "and", "more", "</s>"]
    assert row["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1, 1]
    batch = module.collate(module.datasets["train"])
    assert batch["input_ids"].shape == (2, 8) and batch["attention_mask"][1].sum() == 5


@pytest.mark.parametrize("value", ['["b", "a"]', "b|a"])
def test_multi_label_lists_and_delimited_strings(tokenizer_dir: Path, tmp_path: Path, value: str) -> None:
    """JSON lists and delimiter-separated strings give the same multi-hot rows over the sorted vocabulary."""
    path = write_csv(tmp_path / "m.csv", [{"text": "the goal", "label": value}, {"text": "soup", "label": "c"}])
    module = data(
        tokenizer_dir,
        train_path=str(path),
        val_path=str(path),
        multi_label=True,
        label_separator="|" if "|" in value else None,
    )
    module.setup("fit")
    assert module.vocabulary.names == ["a", "b", "c"]
    assert torch.equal(module.collate(module.datasets["train"])["labels"], torch.tensor([[1, 1, 0], [0, 0, 1]]))


def test_long_rows_truncated_with_one_warning(
    tokenizer_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Rows over max_length are cut to it (specials kept); one warning gives the count."""
    rows = [{"text": "the " * 30, "label": "a"}, {"text": "news", "label": "b"}, {"text": "a " * 20, "label": "a"}]
    path = write_csv(tmp_path / "long.csv", rows)
    module = data(tokenizer_dir, train_path=str(path), val_path=str(path), max_length=10)
    with caplog.at_level(logging.WARNING):
        module.setup("fit")
    assert [len(r["input_ids"]) for r in module.datasets["train"]] == [10, 3, 10]
    assert module.tokenizer.convert_ids_to_tokens(module.datasets["train"][0]["input_ids"])[-1] == "</s>"
    warnings = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert len(warnings) == 2 and all("2 of 3 rows" in w for w in warnings)  # train and val, one line each


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("text,label\nthe goal,a\nsoup\n", ".csv", r"bad\.csv:3: row has 1 fields but the header has 2"),
        ('{"text": "goal", "label": "a"}\n{"label": "b"}\n', ".jsonl", r"bad\.jsonl:2: missing field 'text'"),
        ('{"text": "goal", "label": "a"}\n{"text": "  ", "label": "b"}\n', ".jsonl", r"bad\.jsonl:2: empty text"),
        ('{"text": "goal", "label": "a"}\nnot json\n', ".jsonl", r"bad\.jsonl:2: line is not valid JSON"),
        ("text;label\n", ".csv", r"bad\.csv:1: header is missing column 'text', 'label'"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_row(
    tokenizer_dir: Path, tmp_path: Path, content: str, suffix: str, message: str
) -> None:
    """Each problem is a DataError `file:line: what`."""
    path = tmp_path / f"bad{suffix}"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message) as err:
        data(tokenizer_dir, train_path=str(path), val_path=str(path)).setup("fit")
    assert "\n" not in str(err.value)


def test_unseen_label_lists_known_ones(tokenizer_dir: Path, tmp_path: Path) -> None:
    """A validation label training never saw is an error at its row listing the known labels."""
    train = write_csv(tmp_path / "train.csv", [{"text": "goal", "label": "a"}, {"text": "soup", "label": "b"}])
    val = write_csv(tmp_path / "val.csv", [{"text": "goal", "label": "a"}, {"text": "bank", "label": "z"}])
    with pytest.raises(DataError, match=r"val\.csv:3: unknown label 'z'; known labels: 'a', 'b'"):
        data(tokenizer_dir, train_path=str(train), val_path=str(val)).setup("fit")
