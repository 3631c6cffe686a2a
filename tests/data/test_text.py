"""read_text / iter_documents: plain text and JSONL corpora, validated while read."""

import os

import pytest

from tetraformer.data import DataError, iter_documents, read_text

PROSE = "First line.\nSecond line.\n\n\nNew paragraph\r\ncontinues.\n"


def test_whole_file_is_one_document(write) -> None:
    path = write("a.txt", PROSE)
    docs = list(iter_documents(path))
    assert docs == [{"text": PROSE.replace("\r\n", "\n"), "source": str(path), "line": 1}]


def test_paragraph_documents(write) -> None:
    docs = list(iter_documents(write("a.txt", PROSE), documents="paragraph"))
    assert [(d["text"], d["line"]) for d in docs] == [
        ("First line.\nSecond line.", 1),
        ("New paragraph\ncontinues.", 5),
    ]


def test_line_documents_skip_blank_lines(write) -> None:
    docs = list(iter_documents(write("a.txt", PROSE), documents="line"))
    assert [(d["text"], d["line"]) for d in docs] == [
        ("First line.", 1),
        ("Second line.", 2),
        ("New paragraph", 5),
        ("continues.", 6),
    ]


def test_blank_only_file_is_an_error(write) -> None:
    with pytest.raises(DataError, match=r"blank\.txt: file has no text"):
        list(iter_documents(write("blank.txt", "\n  \n")))


def test_read_text_builds_a_dataset_over_files(write, tmp_path) -> None:
    write("corpus/a.txt", "alpha\n")
    write("corpus/b.jsonl", '{"text": "beta", "id": 1}\n\n{"text": "gamma", "id": 2}\n')
    ds = read_text(tmp_path / "corpus")
    assert ds.column_names == ["text", "source", "line"]
    assert ds["text"][:] == ["alpha\n", "beta", "gamma"]
    assert ds["line"][:] == [1, 1, 3]
    assert ds["source"][0].endswith("a.txt")


def test_jsonl_custom_field(write) -> None:
    ds = read_text(write("d.jsonl", '{"body": "x"}\n{"body": "y"}\n'), field="body")
    assert ds["text"][:] == ["x", "y"]


def test_text_column_from_csv(write) -> None:
    ds = read_text(write("d.csv", 'text,label\n"a, b",1\nc,0\n'))
    assert ds["text"][:] == ["a, b", "c"]


def test_jsonl_line_not_json(write) -> None:
    path = write("train.jsonl", '{"text": "ok"}\n{"text": "ok"}\n{"text" "bad"}\n')
    with pytest.raises(DataError) as info:
        read_text(path)
    assert str(info.value) == f"{path}:3: line is not valid JSON: expecting ':' delimiter at column 9"


def test_jsonl_missing_field_lists_keys(write) -> None:
    path = write("train.jsonl", '{"text": "ok"}\n{"body": "x", "id": 7}\n')
    with pytest.raises(DataError, match=r"train\.jsonl:2: missing field 'text' \(keys present: 'body', 'id'\)"):
        read_text(path)


def test_jsonl_non_string_value(write) -> None:
    path = write("train.jsonl", '{"text": ["a", "b"]}\n')
    with pytest.raises(DataError, match=r"train\.jsonl:1: field 'text' must be a string, got array"):
        read_text(path)


def test_undecodable_text_is_a_data_error_from_read_text(write) -> None:
    path = write("bad.txt", b"fine\nalso fine\nnot \xfe fine\n")
    with pytest.raises(DataError, match=r"bad\.txt:3: cannot decode byte 0xfe at byte offset 19 as utf-8"):
        read_text(path)
    assert read_text(path, encoding="latin-1")["text"][0].endswith("not þ fine\n")


def test_edited_file_is_read_again_not_served_from_cache(write) -> None:
    path = write("a.txt", "old text\n")
    assert read_text(path)["text"][:] == ["old text\n"]
    path.write_text("new text\n", encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert read_text(path)["text"][:] == ["new text\n"]


def test_unknown_options_are_value_errors(write) -> None:
    path = write("a.txt", "x\n")
    with pytest.raises(ValueError, match="unknown documents 'sentence'; expected one of file, paragraph, line"):
        read_text(path, documents="sentence")
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        read_text(path, format="xml")
