"""`tetraformer vectors`: word vectors counted from raw text, CoNLL words (never their tags) and JSONL, written
where `--model.word_vectors.path` reads them; bad input is one line naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tetraformer.cli import main
from tetraformer.data.word_vectors import read_word_vectors


def write_inputs(folder: Path) -> list[Path]:
    """The same six sentences as raw text, CoNLL and JSONL."""
    sentences = [["anna", "met", "boris"], ["boris", "met", "anna"], ["the", "cat", "sat"]] * 2
    text = folder / "notes.txt"
    text.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    conll = folder / "tagged.conll"
    conll.write_text("".join("".join(f"{w}\tB-PER\n" for w in s) + "\n" for s in sentences), encoding="utf-8")
    jsonl = folder / "rows.jsonl"
    jsonl.write_text("".join(json.dumps({"tokens": s}) + "\n" for s in sentences), encoding="utf-8")
    return [text, conll, jsonl]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_each_format_gives_the_same_vectors_the_tagger_reads(index: int, tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    main(["vectors", "--input", str(inputs[0]), "--output", str(tmp_path / "from_text"), "--dims", "3"])
    main(["vectors", "--input", str(inputs[index]), "--output", str(tmp_path / "out"), "--dims", "3"])
    expected, found = read_word_vectors(tmp_path / "from_text"), read_word_vectors(tmp_path / "out")
    assert set(found.rows) == {"anna", "met", "boris", "the", "cat", "sat"}  # no tag read as a word
    assert found.table.shape == (6, 3) and (found.table == expected.table).all()


def test_bad_input_is_one_line_naming_the_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"tokens": ["a", "b"]}\n{"tokens": "a b"\n', encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["vectors", "--input", str(bad), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and f"{bad}:2" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_file_without_sentences_is_named_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_inputs(tmp_path)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["vectors", "--input", str(inputs[0]), str(empty), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and str(empty) in err and "no sentences" in err
    assert not (tmp_path / "out").exists()


def test_counting_in_chunks_gives_the_vectors_of_counting_at_once(tmp_path: Path) -> None:
    inputs = [str(path) for path in write_inputs(tmp_path)]
    main(["vectors", "--input", *inputs, "--output", str(tmp_path / "once"), "--dims", "3"])
    main(["vectors", "--input", *inputs, "--output", str(tmp_path / "chunks"), "--dims", "3", "--chunk-words", "4"])
    once, chunks = read_word_vectors(tmp_path / "once"), read_word_vectors(tmp_path / "chunks")
    assert once.rows == chunks.rows
    np.testing.assert_allclose(chunks.table, once.table, atol=1e-5)
