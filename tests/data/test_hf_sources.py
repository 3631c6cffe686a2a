"""Hugging Face datasets as sources: Parquet/Arrow files, save_to_disk folders, the local cache by name."""

from __future__ import annotations

import io
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Image, Sequence, Value
from PIL import Image as PILImage

from tests.data.hf_cache import cache_entry
from tetraformer.data import DataError, read_records, read_text, resolve_files
from tetraformer.data.conll import read_sentences
from tetraformer.data.hf_sources import class_names, dataset_splits, source_files
from tetraformer.data.image_sources import Reading, read_source
from tetraformer.errors import ConfigError

TOPICS = ClassLabel(names=["world", "sports", "business"])  # not sorted: the vocabulary keeps this order
TAGS = ClassLabel(names=["O", "B-PER", "I-PER", "B-LOC"])


def topics(n: int = 6) -> Dataset:
    """Texts with a ClassLabel topic column."""
    features = Features({"text": Value("string"), "label": TOPICS, "id": Value("int64")})
    return Dataset.from_dict(
        {"text": [f"text {i}" for i in range(n)], "label": [i % 3 for i in range(n)], "id": list(range(n))}, features
    )


def tagged() -> Dataset:
    """Sentences with a Sequence(ClassLabel) tags column."""
    features = Features({"tokens": Sequence(Value("string")), "ner_tags": Sequence(TAGS)})
    return Dataset.from_dict({"tokens": [["Ann", "went"], ["to", "Rome"]], "ner_tags": [[1, 0], [0, 3]]}, features)


def png(value: int) -> bytes:
    """A 4x4 gray PNG of one value."""
    out = io.BytesIO()
    PILImage.fromarray(np.full((4, 4), value, np.uint8), mode="L").save(out, format="PNG")
    return out.getvalue()


def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ag_news (train and test splits of topics) in a private datasets cache."""
    return cache_entry({"train": topics(), "test": topics(3)}, "ag_news", tmp_path, monkeypatch)


# --- kinds of source ------------------------------------------------------------------------------------------
def test_parquet_rows_carry_label_names_and_row_index(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    topics().to_parquet(str(path))
    rows = list(read_records(path, required_fields=["text", "label"]))
    assert [r["label"] for r in rows] == ["world", "sports", "business"] * 2
    assert [(r["_source"], r["_line"]) for r in rows] == [(str(path), i) for i in range(6)]
    assert class_names(resolve_files(path), "label") == TOPICS.names


def test_arrow_files_in_stream_and_file_formats(tmp_path: Path) -> None:
    table = topics().data.table
    for name, writer in (("stream.arrow", pa.ipc.new_stream), ("file.arrow", pa.ipc.new_file)):
        with pa.OSFile(str(tmp_path / name), "wb") as sink, writer(sink, table.schema) as out:
            out.write_table(table)
    both = read_records(tmp_path, required_fields=["text", "label"])
    assert list(both["label"]) == ["world", "sports", "business"] * 4
    assert read_text(tmp_path / "file.arrow")["text"] == [f"text {i}" for i in range(6)]


def test_folder_and_glob_of_parquet_files(tmp_path: Path) -> None:
    (tmp_path / "shards").mkdir()
    topics().to_parquet(str(tmp_path / "shards" / "a.parquet"))
    topics(3).to_parquet(str(tmp_path / "shards" / "b.parquet"))
    assert len(read_records(tmp_path / "shards", required_fields=["text"])) == 9
    assert len(read_records(str(tmp_path / "shards" / "*.parquet"), required_fields=["text"])) == 9


def test_saved_dataset_and_dataset_dict_splits(tmp_path: Path) -> None:
    topics().save_to_disk(str(tmp_path / "one"))
    DatasetDict({"train": topics(), "validation": topics(3)}).save_to_disk(str(tmp_path / "dict"))
    assert len(read_records(tmp_path / "one", required_fields=["text"])) == 6
    assert len(read_records(f"{tmp_path / 'dict'}:validation", required_fields=["text"])) == 3
    with pytest.raises(DataError, match="is one Dataset without splits: drop ':train'"):
        resolve_files(f"{tmp_path / 'one'}:train")
    files = source_files(f"{tmp_path / 'dict'}:train")
    assert files and all(f.suffix == ".arrow" and f.is_relative_to(tmp_path / "dict" / "train") for f in files)


def test_each_path_reads_its_role_split(tmp_path: Path) -> None:
    DatasetDict({"train": topics(), "validation": topics(3)}).save_to_disk(str(tmp_path / "dict"))
    d = str(tmp_path / "dict")
    assert dataset_splits(None, d, d, d, None) == (f"{d}:train", f"{d}:validation", f"{d}:test", None)
    assert dataset_splits("validation", d, f"{d}:train", None, None)[:2] == (f"{d}:validation", f"{d}:train")
    plain = tmp_path / "t.parquet"
    assert dataset_splits(None, str(plain), None, None, None)[0] == str(plain)
    with pytest.raises(ConfigError, match="--data.split 'dev': --data.train_path .* has no splits to choose from"):
        dataset_splits("dev", str(plain), None, None, None)


def test_cached_dataset_by_name_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached(tmp_path, monkeypatch)
    assert list(read_records("hf:ag_news:test", required_fields=["label"])["label"]) == ["world", "sports", "business"]
    files = resolve_files("hf:ag_news:train")
    assert files and all(f.is_relative_to(tmp_path / "hf_datasets") for f in files)
    assert class_names(files, "label") == TOPICS.names


def test_tags_sequence_of_class_labels_read_by_name(tmp_path: Path) -> None:
    tagged().to_parquet(str(tmp_path / "ner.parquet"))
    sentences = read_sentences(tmp_path / "ner.parquet", tags_field="ner_tags")
    assert [s.tags for s in sentences] == [["B-PER", "O"], ["O", "B-LOC"]]
    assert class_names([tmp_path / "ner.parquet"], "ner_tags") == TAGS.names


def test_image_column_decoded_with_labels(tmp_path: Path) -> None:
    features = Features({"image": Image(), "label": ClassLabel(names=["dark", "light"])})
    data = {"image": [{"bytes": png(10), "path": None}, {"bytes": png(240), "path": None}], "label": [0, 1]}
    Dataset.from_dict(data, features).save_to_disk(str(tmp_path / "images"))
    images = read_source(str(tmp_path / "images"), Reading(1, 4, None, cache=False), labelled=True)
    assert images.labels == ["dark", "light"]
    assert images.images[:, 0, 0, 0].tolist() == [10, 240]
    assert images.where[1][1] == 1


# --- errors: one line naming the source ------------------------------------------------------------------------
def one_line(err: pytest.ExceptionInfo[BaseException]) -> str:
    """The error's text, checked to be one line."""
    text = str(err.value)
    assert "\n" not in text
    return text


def test_corrupt_parquet_and_arrow_name_the_file(tmp_path: Path) -> None:
    for name in ("bad.parquet", "bad.arrow"):
        (tmp_path / name).write_bytes(b"not a table " * 8)
        with pytest.raises(DataError) as err:
            read_records(tmp_path / name)
        assert one_line(err).startswith(f"{tmp_path / name}: not a readable")


def test_missing_column_lists_the_columns(tmp_path: Path) -> None:
    topics().to_parquet(str(tmp_path / "t.parquet"))
    with pytest.raises(DataError) as err:
        read_records(tmp_path / "t.parquet", required_fields=["sentence"])
    assert one_line(err) == f"{tmp_path / 't.parquet'}: no column 'sentence' (columns: 'text', 'label', 'id')"


def test_unknown_or_missing_split_lists_the_splits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    DatasetDict({"train": topics(), "validation": topics(3)}).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(DataError) as err:
        resolve_files(f"{tmp_path / 'dict'}:dev")
    assert one_line(err).endswith("has no split 'dev' (splits: train, validation)")
    with pytest.raises(DataError, match="holds splits train, validation: name one as PATH:SPLIT"):
        resolve_files(tmp_path / "dict")
    cached(tmp_path, monkeypatch)
    with pytest.raises(DataError) as err:
        resolve_files("hf:ag_news:dev")
    assert one_line(err) == "hf:ag_news: has no split 'dev' (splits: train, test)"


def test_name_not_in_the_cache_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty"))
    with pytest.raises(DataError) as err:
        resolve_files("hf:no_such_dataset:train")
    text = one_line(err)
    assert text.startswith("hf:no_such_dataset: not in the local Hugging Face datasets cache")
    assert str(tmp_path / "empty") in text and "offline" in text and "HF_DATASETS_CACHE" in text


def test_configurations_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hf:NAME/CONFIG picks a cached configuration; without one, several cached ones are listed."""
    source = tmp_path / "hub" / "topics"
    for config, n in (("small", 3), ("large", 6)):
        (source / config).mkdir(parents=True)
        topics(n).to_parquet(str(source / config / "train-00000-of-00001.parquet"))
    configs = "".join(
        f"- config_name: {c}\n  data_files:\n  - split: train\n    path: {c}/*.parquet\n" for c in ("small", "large")
    )
    (source / "README.md").write_text(f"---\nconfigs:\n{configs}---\n", encoding="utf-8")
    for config in ("small", "large"):
        datasets.load_dataset(str(source), config, cache_dir=str(tmp_path / "hf_datasets"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_datasets"))
    assert len(read_records("hf:topics/small:train", required_fields=["text"])) == 3
    assert len(read_records("hf:topics/large:train", required_fields=["text"])) == 6
    with pytest.raises(DataError) as err:
        resolve_files("hf:topics:train")
    assert one_line(err) == "hf:topics: several configurations are cached (large, small): name one as hf:topics/CONFIG"
    with pytest.raises(DataError) as err:
        resolve_files("hf:topics/tiny:train")
    assert one_line(err) == "hf:topics/tiny: has no cached configuration 'tiny' (cached: large, small)"
