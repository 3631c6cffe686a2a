"""Data fingerprints: content decides what changed (a touched or moved file is the same data, a same-size edit is
not), and a file recorded with its path, size and mtime is not read again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tetraformer.data import fingerprint as fingerprint_module
from tetraformer.data.fingerprint import data_change, data_fingerprint


@pytest.fixture
def files(tmp_path: Path) -> dict[str, list[Path]]:
    """A training folder of two files and a validation file."""
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "a.txt").write_text("alpha beta\n")
    (tmp_path / "train" / "b.txt").write_text("gamma delta\n")
    (tmp_path / "val.txt").write_text("epsilon\n")
    return {"train": [tmp_path / "train"], "val": [tmp_path / "val.txt"]}


def test_the_same_content_is_no_change_wherever_it_is(files: dict[str, list[Path]], tmp_path: Path) -> None:
    recorded = data_fingerprint(files)
    assert [Path(entry[0]).name for entry in recorded["train"]] == ["a.txt", "b.txt"]
    os.utime(tmp_path / "train" / "a.txt", (1, 1))
    moved = shutil.copytree(tmp_path / "train", tmp_path / "elsewhere")
    assert data_change(recorded, data_fingerprint(files)) is None
    assert data_change(recorded, data_fingerprint({**files, "train": [moved]})) is None


def test_a_same_size_edit_is_named(files: dict[str, list[Path]], tmp_path: Path) -> None:
    recorded = data_fingerprint(files)
    (tmp_path / "train" / "b.txt").write_text("delta gamma\n")
    change = data_change(recorded, data_fingerprint(files, known=recorded))
    assert change == f"the training file {(tmp_path / 'train' / 'b.txt').resolve()} differs in content"


def test_files_added_and_splits_dropped_are_changes(files: dict[str, list[Path]], tmp_path: Path) -> None:
    recorded = data_fingerprint(files)
    (tmp_path / "train" / "c.txt").write_text("more\n")
    assert data_change(recorded, data_fingerprint(files)) == "the training data has 3 file(s), it had 2"
    (tmp_path / "train" / "c.txt").unlink()
    assert data_change(recorded, data_fingerprint({"train": files["train"]})) == (
        "the validation data is not read now but was"
    )


def test_recorded_files_are_not_read_again(
    files: dict[str, list[Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = data_fingerprint(files)
    read: list[Path] = []
    real = fingerprint_module.file_checksum
    monkeypatch.setattr(fingerprint_module, "file_checksum", lambda path: read.append(path) or real(path))
    assert data_fingerprint(files, known=recorded) == recorded and read == []
    (tmp_path / "val.txt").write_text("epsilon!\n")
    data_fingerprint(files, known=recorded)
    assert read == [(tmp_path / "val.txt").resolve()]
