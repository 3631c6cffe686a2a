"""Export folders: never over a user's files, replaced whole when a previous export, never left half-written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetraformer.interop import InteropError
from tetraformer.interop.files import EXPORT_MARK, check_export_dir, staged_export


def test_a_new_or_empty_folder_or_a_previous_export_is_accepted(tmp_path: Path) -> None:
    """Nothing there, an empty folder, or only what an export writes with its mark."""
    check_export_dir(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    check_export_dir(tmp_path / "empty")
    previous = tmp_path / "previous"
    previous.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", EXPORT_MARK):
        (previous / name).write_text("x")
    check_export_dir(previous)


@pytest.mark.parametrize("names", [["notes.txt"], ["config.json", "model.safetensors"], [EXPORT_MARK, "notes.txt"]])
def test_other_files_are_refused_naming_them(tmp_path: Path, names: list[str]) -> None:
    """A user's folder (a Hugging Face model of theirs too, or an export they added a file to) is refused."""
    for name in names:
        (tmp_path / name).write_text("mine")
    with pytest.raises(InteropError, match="not empty and not a previous export") as err:
        check_export_dir(tmp_path)
    assert names[-1] in str(err.value)
    assert all((tmp_path / name).read_text() == "mine" for name in names)


def test_a_file_is_refused(tmp_path: Path) -> None:
    """The destination must be a folder."""
    (tmp_path / "out").write_text("x")
    with pytest.raises(InteropError, match="is a file"):
        check_export_dir(tmp_path / "out")


def test_a_failed_export_leaves_nothing_and_keeps_the_previous_one(tmp_path: Path) -> None:
    """An error while writing leaves the previous export as it was and no temporary folder beside it."""
    out = tmp_path / "out"
    with staged_export(out) as stage:
        (stage / "config.json").write_text("first")
    with pytest.raises(RuntimeError), staged_export(out) as stage:
        (stage / "config.json").write_text("second")
        raise RuntimeError("failed mid-way")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (out / "config.json").read_text() == "first" and (out / EXPORT_MARK).is_file()
    with pytest.raises(RuntimeError), staged_export(tmp_path / "never") as stage:
        raise RuntimeError("failed at once")
    assert not (tmp_path / "never").exists()
