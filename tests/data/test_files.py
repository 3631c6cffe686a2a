"""resolve_files: files, directories, globs, lists, and the errors for each."""

import pytest

from tetraformer.data import DataError, resolve_files


@pytest.fixture
def tree(write, tmp_path):
    write("corpus/b.txt", "b")
    write("corpus/a.txt", "a")
    write("corpus/sub/c.txt", "c")
    write("corpus/sub/d.jsonl", '{"text": "d"}')
    write("corpus/.hidden.txt", "h")
    write("corpus/.git/config.txt", "g")
    return tmp_path / "corpus"


def test_single_file(tree) -> None:
    assert resolve_files(tree / "a.txt") == [tree / "a.txt"]


def test_directory_is_recursive_sorted_and_skips_hidden(tree) -> None:
    names = [p.relative_to(tree).as_posix() for p in resolve_files(tree)]
    assert names == ["a.txt", "b.txt", "sub/c.txt", "sub/d.jsonl"]


def test_directory_filtered_by_suffix(tree) -> None:
    assert resolve_files(str(tree), suffixes=["jsonl"]) == [tree / "sub" / "d.jsonl"]
    assert len(resolve_files(tree, suffixes=[".TXT"])) == 3


def test_glob_and_recursive_glob(tree) -> None:
    assert resolve_files(f"{tree}/*.txt") == [tree / "a.txt", tree / "b.txt"]
    assert resolve_files(f"{tree}/**/*.jsonl") == [tree / "sub" / "d.jsonl"]


def test_list_of_specs_is_deduplicated_in_order(tree) -> None:
    assert resolve_files([tree / "b.txt", f"{tree}/*.txt"]) == [tree / "b.txt", tree / "a.txt"]


def test_missing_path(tmp_path) -> None:
    with pytest.raises(DataError, match=r"nope\.txt: no such file or directory"):
        resolve_files(tmp_path / "nope.txt")


def test_glob_matching_nothing(tree) -> None:
    with pytest.raises(DataError, match=r"\*\.csv: glob matched no files"):
        resolve_files(f"{tree}/*.csv")


def test_directory_without_matching_files(tree) -> None:
    with pytest.raises(DataError, match="directory has no data files with suffix .csv"):
        resolve_files(tree, suffixes=["csv"])


def test_empty_file_is_named(write) -> None:
    empty = write("corpus/empty.txt", "")
    with pytest.raises(DataError, match="empty.txt: file is empty") as info:
        resolve_files(empty.parent)
    assert info.value.path == str(empty)


def test_empty_list() -> None:
    with pytest.raises(DataError, match="no data files given"):
        resolve_files([])
