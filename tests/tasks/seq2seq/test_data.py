"""Seq2SeqData: shift-right and loss masking, the formats it reads, truncation, and every bad-input message."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tasks.seq2seq.data import Seq2SeqData
from tasks.seq2seq.reading import PairFile
from tetraformer.data import DataError, train_tokenizer


@pytest.fixture
def tokenizer(tmp_path: Path):
    """A char tokenizer over lower-case letters and spaces."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("abcdefghijklmnopqrstuvwxyz :\n" * 3, encoding="utf-8")
    return train_tokenizer(corpus, "char", 100, tmp_path / "tok")


def data_module(tokenizer, **options) -> Seq2SeqData:
    """A datamodule with a given tokenizer (no Trainer)."""
    module = Seq2SeqData(**options)
    module.tokenizer = tokenizer
    return module


def test_batches_mask_padding_in_the_loss(tokenizer, tmp_path: Path) -> None:
    """Labels end in EOS and pad with -100; decoder inputs start with the tokenizer's start token (BOS)."""
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"source": "abc", "target": "xyz"}\n{"source": "a", "target": "q"}\n', encoding="utf-8")
    data = data_module(tokenizer, test_path=str(path))
    data.setup("test")
    batch = data.collate(list(data.datasets["test"]))
    xyz = tokenizer.convert_tokens_to_ids(list("xyz"))
    q = tokenizer.convert_tokens_to_ids("q")
    bos, eos, pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    assert batch["labels"].tolist() == [[*xyz, eos], [q, eos, -100, -100]]
    assert batch["decoder_input_ids"].tolist() == [[bos, *xyz], [bos, q, eos, pad]]
    assert batch["decoder_attention_mask"].tolist() == [[True] * 4, [True, True, False, False]]
    assert batch["input_ids"][1].tolist() == [bos, tokenizer.convert_tokens_to_ids("a"), eos, pad, pad]
    assert batch["target"] == ["xyz", "q"]


def test_reads_tsv_csv_and_parallel_files_alike(tokenizer, tmp_path: Path) -> None:
    """TSV, CSV (custom field names) and two parallel text files give the same pairs."""
    (tmp_path / "p.tsv").write_text("de\ten\nab\tcd\nef\tgh\n", encoding="utf-8")
    (tmp_path / "p.csv").write_text("de,en\nab,cd\nef,gh\n", encoding="utf-8")
    (tmp_path / "src.txt").write_text("ab\nef\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("cd\ngh\n", encoding="utf-8")
    expected = [("ab", "cd"), ("ef", "gh")]
    for name in ("p.tsv", "p.csv"):
        data = data_module(tokenizer, train_path=str(tmp_path / name), source_field="de", target_field="en")
        assert [(p.source, p.target) for p in data.training_pairs()] == expected
    data = data_module(tokenizer, source_path=str(tmp_path / "src.txt"), target_path=str(tmp_path / "tgt.txt"))
    assert [(p.source, p.target) for p in data.training_pairs()] == expected


def test_prefixes_and_a_mixture_of_files(tokenizer, tmp_path: Path) -> None:
    """`source_prefix` goes before every source; a mixture puts each file's own prefix before its sources."""
    (tmp_path / "a.jsonl").write_text('{"source": "ab", "target": "cd"}\n', encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"source": "ef", "target": "g"}\n', encoding="utf-8")
    data = data_module(tokenizer, train_path=str(tmp_path / "a.jsonl"), source_prefix="rev: ")
    assert [p.source for p in data.training_pairs()] == ["rev: ab"]
    mixture = [PairFile(str(tmp_path / "a.jsonl"), "one: "), PairFile(str(tmp_path / "b.jsonl"), "two: ")]
    data = data_module(tokenizer, mixture=mixture)
    assert [(p.source, p.target) for p in data.training_pairs()] == [("one: ab", "cd"), ("two: ef", "g")]


def test_long_rows_are_truncated_counted_and_warned_once(tokenizer, tmp_path: Path, caplog) -> None:
    """Sources and targets over their limits are cut (keeping EOS), and one warning counts them."""
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        '{"source": "abcdefgh", "target": "abcdefgh"}\n{"source": "ab", "target": "cd"}\n'
        '{"source": "abcdefgh", "target": "ab"}\n',
        encoding="utf-8",
    )
    data = data_module(tokenizer, test_path=str(path), max_source_length=5, max_target_length=4)
    with caplog.at_level(logging.WARNING):
        data.setup("test")
    rows = list(data.datasets["test"])
    assert [len(r["input_ids"]) for r in rows] == [5, 4, 5]
    assert [len(r["labels"]) for r in rows] == [4, 3, 3]
    assert all(r["input_ids"][-1] == tokenizer.eos_token_id == r["labels"][-1] for r in rows)
    assert rows[0]["source"] == "abc"  # the text generation sees is what the model was trained on
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"{path}: truncated 2 of 3 sources to max_source_length=5 and 1 targets to max_target_length=4 tokens"
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"source": "ab", "target": "cd"}\n{"source": "ab"}\n', "pairs.jsonl:2: missing field 'target'"),
        ('{"source": "ab", "target": "cd"}\n{"text": "ab", "target": "x"}\n', "pairs.jsonl:2: missing field 'source'"),
        (
            '{"source": "ab", "target": "cd"}\n{"source": " ", "target": "cd"}\n',
            "pairs.jsonl:2: empty text in field 'source'",
        ),
        ('{"source": "ab", "target": ""}\n', "pairs.jsonl:1: empty text in field 'target'"),
    ],
)
def test_bad_records_name_file_and_line(tokenizer, tmp_path: Path, content: str, message: str) -> None:
    """Missing fields and empty texts are one-line errors at the record."""
    path = tmp_path / "pairs.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as err:
        data_module(tokenizer, train_path=str(path)).training_pairs()
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_parallel_files_of_different_lengths_name_both_counts(tokenizer, tmp_path: Path) -> None:
    """Parallel files must have as many lines; the error names both files and counts."""
    (tmp_path / "src.txt").write_text("ab\ncd\nef\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("ab\ncd\n", encoding="utf-8")
    data = data_module(tokenizer, source_path=str(tmp_path / "src.txt"), target_path=str(tmp_path / "tgt.txt"))
    with pytest.raises(DataError, match=r"src\.txt has 3 lines, .*tgt\.txt has 2"):
        data.training_pairs()


def test_empty_parallel_line_names_its_file_and_line(tokenizer, tmp_path: Path) -> None:
    """An empty line in either parallel file is an error at that file and line."""
    (tmp_path / "src.txt").write_text("ab\ncd\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("ab\n \n", encoding="utf-8")
    data = data_module(tokenizer, source_path=str(tmp_path / "src.txt"), target_path=str(tmp_path / "tgt.txt"))
    with pytest.raises(DataError, match=r"tgt\.txt:2: empty target line"):
        data.training_pairs()


@pytest.mark.parametrize("name", ["pairs.jsonl", "src.txt"])
def test_undecodable_bytes_name_file_and_line(tokenizer, tmp_path: Path, name: str) -> None:
    """Bytes that are not UTF-8 are an error at their file and line, in records and in parallel files."""
    (tmp_path / "pairs.jsonl").write_bytes(b'{"source": "ab", "target": "cd"}\n{"source": "\xff", "target": "x"}\n')
    (tmp_path / "src.txt").write_bytes(b"ab\n\xff\n")
    (tmp_path / "tgt.txt").write_text("ab\ncd\n", encoding="utf-8")
    options = (
        {"train_path": str(tmp_path / name)}
        if name.endswith("jsonl")
        else {"source_path": str(tmp_path / "src.txt"), "target_path": str(tmp_path / "tgt.txt")}
    )
    with pytest.raises(DataError, match=rf"{name}:2: cannot decode byte 0xff"):
        data_module(tokenizer, **options).training_pairs()


def test_span_corruption_reads_each_plain_text_line_once(tmp_path: Path) -> None:
    """Plain-text files (a glob) are read once whatever text_field lists; records read each listed field."""
    (tmp_path / "a.txt").write_text("one text\n\nanother text\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("third text\n", encoding="utf-8")
    (tmp_path / "pairs.jsonl").write_text('{"source": "ein", "target": "one"}\n', encoding="utf-8")
    module = Seq2SeqData(objective="span_corruption", text_field=["source", "target"])
    assert sorted(module.documents(str(tmp_path / "*.txt"))) == ["another text", "one text", "third text"]
    assert module.documents(str(tmp_path / "pairs.jsonl")) == ["ein", "one"]
    with pytest.raises(DataError, match=r"pairs.jsonl.*--data.text_field"):
        Seq2SeqData(objective="span_corruption", text_field=None).documents(str(tmp_path / "pairs.jsonl"))


def test_pairs_from_a_dataset_dict_split(tokenizer, tmp_path: Path) -> None:
    """A DatasetDict folder as train_path reads its train split; the source/target fields name its columns."""
    from datasets import Dataset, DatasetDict

    rows = {"de": ["abc", "de"], "en": ["xyz", "q"]}
    DatasetDict({"train": Dataset.from_dict(rows), "test": Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "d"))
    data = data_module(tokenizer, train_path=str(tmp_path / "d"), source_field="de", target_field="en")
    assert data.train_path == f"{tmp_path / 'd'}:train"
    pairs = data.read(data.train_path, "translate: ")
    assert [(p.source, p.target, p.where[1]) for p in pairs] == [
        ("translate: abc", "xyz", 0),
        ("translate: de", "q", 1),
    ]
