"""The row store behind the tagger's data: a second setup tokenizes nothing, another tokenizer rebuilds (logged),
windows are those of each sentence encoded alone, and tags are encoded by whichever vocabulary the run uses."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tasks.token_classification import data as data_module
from tasks.token_classification.data import TokenClassificationData
from tasks.token_classification.windows import neighbour_words
from tests.tasks.stored_rows import all_batches, assert_same_batches, refuse, stamps, store_names
from tests.tasks.token_classification.conftest import tagged_sentences, write_conll
from tetraformer.data import DataError, LabelVocabulary, load_tokenizer, train_tokenizer
from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.conll import TaggedSentence
from tetraformer.data.spec import DataSpec
from tetraformer.data.word_alignment import sentence_windows


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Train and test CoNLL files (sentences long enough to need several windows; test is predicted too), the words
    as text, a tokenizer of them."""
    found = {"train": write_conll(tmp_path / "train.conll", tagged_sentences(30, 0, (6, 20)))}
    found["test"] = found["predict"] = write_conll(tmp_path / "test.conll", tagged_sentences(8, 1, (6, 20)))
    found["words"] = tmp_path / "words.txt"
    text = "".join(" ".join(w for w, _ in s) + "\n" for s in tagged_sentences(30, 0))
    found["words"].write_text(text, encoding="utf-8")
    train_tokenizer([found["words"]], "wordpiece", 100, tmp_path / "tok")
    found["tokenizer"] = tmp_path / "tok"
    return found


def datamodule(files: dict[str, Path], cache: Path, **options: Any) -> TokenClassificationData:
    """A tagger's datamodule on the fixture files (windows of 10 ids, stride 3) with its stores under `cache`."""
    paths = {f"{split}_path": str(files[split]) for split in ("train", "test", "predict")}
    options = {"tokenizer": str(files["tokenizer"]), "batch_size": 3, "max_length": 10, "stride": 3, **options}
    return TokenClassificationData(cache_dir=str(cache), **paths, **options)


def test_a_second_setup_reuses_the_stores_and_tokenizes_nothing(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first = all_batches(datamodule(files, tmp_path / "cache", bucket=True), "fit", "test", "predict")
    names = [f"token_classification-{split}" for split in ("predict", "test", "train")]
    assert store_names(tmp_path / "cache") == names
    built = stamps(tmp_path / "cache")
    calls = []
    monkeypatch.setattr(type(load_tokenizer(files["tokenizer"])), "__call__", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(data_module, "tokenize_rows", refuse)
    with caplog.at_level(logging.INFO):
        second = all_batches(datamodule(files, tmp_path / "cache", bucket=True), "fit", "test", "predict")
    assert calls == [] and caplog.text.count("reusing the row store") == 3
    assert stamps(tmp_path / "cache") == built
    assert_same_batches(first, second)


def test_another_tokenizer_or_stride_rebuilds_and_says_why(
    files: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    datamodule(files, tmp_path / "cache").setup("fit")
    train_tokenizer([files["words"]], "char", 60, tmp_path / "other")
    with caplog.at_level(logging.INFO):
        datamodule(files, tmp_path / "cache", tokenizer=str(tmp_path / "other")).setup("fit")
        datamodule(files, tmp_path / "cache", stride=2).setup("fit")
    built = [r.getMessage() for r in caplog.records if r.getMessage().startswith("building the row store")]
    assert len(built) == 2 and "tokenizer changed since token_classification-train-" in built[0]
    assert "stride changed since" in built[1]


def test_windows_are_each_sentence_encoded_alone_with_its_tags(files: dict[str, Path], tmp_path: Path) -> None:
    data = datamodule(files, tmp_path / "cache", num_proc=2)
    data.setup("fit")
    data.setup("test")
    sentences = tagged_sentences(8, 1, (6, 20))
    tokenizer = load_tokenizer(files["tokenizer"])
    expected = []
    for number, sentence in enumerate(sentences):
        words = [w for w, _ in sentence]
        for window in sentence_windows(tokenizer, words, list(range(len(words))), 10, 3):
            tags = [IGNORE_INDEX if w == IGNORE_INDEX else data.vocabulary.ids[sentence[w][1]] for w in window.labels]
            expected.append((number, window.input_ids, window.word_index, tags))
    rows = data.datasets["test"]
    assert [(r["sentence"], r["input_ids"], r["word_index"], r["labels"]) for r in rows] == expected
    assert len({r["sentence"] for r in rows}) < len(rows)  # some sentences need several windows


def test_a_checkpoints_vocabulary_wins_and_an_unknown_tag_names_its_line(
    files: dict[str, Path], tmp_path: Path
) -> None:
    datamodule(files, tmp_path / "cache").setup("fit")
    theirs = LabelVocabulary(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    evaluated = datamodule(files, tmp_path / "cache")
    evaluated.use_spec(DataSpec(labels=theirs, extras={"scheme": "IOB2"}))
    evaluated.setup("test")
    first = evaluated.datasets["test"][0]
    sentence = tagged_sentences(8, 1, (6, 20))[first["sentence"]]
    assert [label for label in first["labels"] if label != IGNORE_INDEX] == [
        theirs.ids[sentence[w][1]] for w in first["word_index"] if w != IGNORE_INDEX
    ]
    narrow = datamodule(files, tmp_path / "cache")
    narrow.use_spec(DataSpec(labels=LabelVocabulary(["O", "B-PER", "I-PER"]), extras={"scheme": "IOB2"}))
    lines = [tag for s in tagged_sentences(8, 1, (6, 20)) for tag in [*(t for _, t in s), None]]
    first_loc = lines.index("B-LOC") + 1
    with pytest.raises(DataError, match=rf"test\.conll:{first_loc}: unknown label 'B-LOC'"):
        narrow.setup("test")


def test_neighbour_words_stay_in_their_file_and_document() -> None:
    """Each sentence's nearest words before and after, up to n, never across a file or a -DOCSTART- document."""
    made = [(["a", "b"], "x", 0), (["c", "d", "e"], "x", 0), (["f"], "x", 0), (["g"], "x", 1), (["h", "i"], "y", 0)]
    sentences = [TaggedSentence(words, None, source, 1, document=doc) for words, source, doc in made]
    before, after = neighbour_words(sentences, 3)
    assert before == [[], ["a", "b"], ["c", "d", "e"], [], []]
    assert after == [["c", "d", "e"], ["f"], [], [], []]
    assert neighbour_words(sentences, 0) == ([[]] * 5, [[]] * 5)


def test_context_windows_read_the_neighbours_and_keep_each_sentences_labels(
    files: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With `context`, a one-window sentence is read between the end of the one before and the start of the one
    after (same file); its own ids and labels are those it has alone; changing `context` rebuilds the store."""
    plain = datamodule(files, tmp_path / "cache", max_length=40)
    plain.setup("fit")
    plain.setup("test")
    with caplog.at_level(logging.INFO):
        wide = datamodule(files, tmp_path / "cache", max_length=40, context=6)
        wide.setup("fit")
        wide.setup("test")
    assert "context changed since" in caplog.text
    tokenizer = load_tokenizer(files["tokenizer"])
    words = [[w for w, _ in s] for s in tagged_sentences(8, 1, (6, 20))]
    rows, alone = list(wide.datasets["test"]), list(plain.datasets["test"])
    assert len(rows) == len(alone) == len(words)  # every sentence fits one window of 40
    for number, (row, own) in enumerate(zip(rows, alone, strict=True)):
        inner = own["input_ids"][1:-1]
        at = next(i for i in range(len(row["input_ids"])) if row["input_ids"][i : i + len(inner)] == inner)
        assert row["labels"][at : at + len(inner)] == own["labels"][1:-1]
        assert row["word_index"][at : at + len(inner)] == own["word_index"][1:-1]
        read_before, read_after = row["input_ids"][1:at], row["input_ids"][at + len(inner) : -1]
        if number:
            previous = tokenizer(words[number - 1], is_split_into_words=True, add_special_tokens=False)["input_ids"]
            assert 0 < len(read_before) <= 6 and previous[len(previous) - len(read_before) :] == read_before
        else:
            assert read_before == []
        if number + 1 < len(words):
            following = tokenizer(words[number + 1], is_split_into_words=True, add_special_tokens=False)["input_ids"]
            assert 0 < len(read_after) <= 6 and following[: len(read_after)] == read_after
        else:
            assert read_after == []
