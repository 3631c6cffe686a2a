"""CoNLL, JSONL and raw-text sentence readers: formats they accept, and one-line errors at file:line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tetraformer.data import DataError
from tetraformer.data.conll import read_sentences, sentence_format, split_words
from tetraformer.data.tag_schemes import tag_problem

Write = Callable[[str, str | bytes], Path]
IOB2 = lambda tag: tag_problem(tag, "IOB2")  # noqa: E731 - the reader's tag check, as the datamodule passes it


def test_conll_docstart_columns_tabs_spaces_crlf_trailing_blanks(write: Write) -> None:
    """-DOCSTART- skipped, the tag is the last of any number of columns, tab or space, CRLF, blank lines at the end."""
    text = (
        "-DOCSTART- -X- O O\r\n\r\n"
        "EU NNP B-NP B-ORG\r\nrejects VBZ B-VP O\r\n\r\n"
        "Peter\tNNP\tB-PER\nBlackburn\tNNP\tI-PER\n\n\n"
        "-DOCSTART- -X- O O\n\n"
        "BRUSSELS   B-LOC\n\n\n\n"
    )
    sentences = read_sentences(write("a.conll", text), check_tag=IOB2)
    assert [s.tokens for s in sentences] == [["EU", "rejects"], ["Peter", "Blackburn"], ["BRUSSELS"]]
    assert [s.tags for s in sentences] == [["B-ORG", "O"], ["B-PER", "I-PER"], ["B-LOC"]]
    assert [s.line for s in sentences] == [3, 6, 12]
    assert sentences[1].line_of(1) == 7
    assert [s.document for s in sentences] == [1, 1, 2]  # each -DOCSTART- line starts a document


def test_tab_separated_tokens_may_hold_spaces(write: Write) -> None:
    """With tabs, columns split only on tabs: a token with a space stays one token."""
    sentences = read_sentences(write("a.tsv", "New York\tB-LOC\nis\tO\n"))
    assert sentences[0].tokens == ["New York", "is"]


def test_jsonl_with_configurable_fields(write: Write) -> None:
    """{"words": [...], "labels": [...]} with field names set; other fields are kept."""
    rows = [{"id": 1, "words": ["Anna", "runs"], "labels": ["B-PER", "O"]}]
    path = write("a.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    [sentence] = read_sentences(path, tokens_field="words", tags_field="labels", check_tag=IOB2)
    assert (sentence.tokens, sentence.tags, sentence.fields["id"], sentence.line) == (
        ["Anna", "runs"],
        ["B-PER", "O"],
        1,
        1,
    )


def test_unlabelled_inputs_for_prediction(write: Write) -> None:
    """Predict reads one-column CoNLL, JSONL raw text and text lines, split on spaces or into characters."""
    conll = read_sentences(write("p.conll", "Anna\nruns\n\nBob\n"), labelled=False)
    assert [s.tokens for s in conll] == [["Anna", "runs"], ["Bob"]] and conll[0].tags is None
    jsonl = read_sentences(write("p.jsonl", '{"text": "東京 へ", "id": 7}\n'), labelled=False, word_split="char")
    assert jsonl[0].tokens == ["東", "京", "へ"] and jsonl[0].fields["id"] == 7
    text = read_sentences(write("p.txt", "Anna runs\n\n  \nBob  sleeps\n"), "text", labelled=False)
    assert [(s.tokens, s.line) for s in text] == [(["Anna", "runs"], 1), (["Bob", "sleeps"], 4)]
    assert split_words(" a  b ") == ["a", "b"]


def test_a_sentence_per_line_is_not_read_as_conll(write: Write) -> None:
    """Predicting, a line of words whose last is no tag stops at its line naming --data.format text (CoNLL would
    take each line's first word as a token of one long sentence); tagged lines in any scheme and tab columns read."""
    with pytest.raises(DataError) as info:
        read_sentences(write("notes.txt", "Hello\nwe met Anna in Oslo\nthe match ended\n"), labelled=False)
    assert str(info.value).endswith(
        "notes.txt:2: line 'we met Anna in Oslo' ends in 'Oslo', which is no tag: a CoNLL file has one token per "
        "line (its tag last) and a blank line after each sentence; for one sentence per line, set --data.format text"
    )
    tagged = read_sentences(
        write("t.conll", "EU NNP B-NP S-ORG\nrejects VBZ B-VP O\n\nNew York\tNNP\n"), labelled=False
    )
    assert [s.tokens for s in tagged] == [["EU", "rejects"], ["New York"]]


def test_format_from_suffix() -> None:
    """.conll/.txt/.tsv/.bio are CoNLL, .jsonl/.json and tables (.parquet/.arrow) records; an unknown suffix names
    --data.format."""
    suffixes = (".conll", ".txt", ".tsv", ".bio", ".jsonl", ".json", ".parquet", ".arrow")
    assert [sentence_format(f"x{s}") for s in suffixes] == ["conll"] * 4 + ["jsonl"] * 4
    assert sentence_format("x.parquet", "conll") == "jsonl"  # a table is read as one, whatever the format
    with pytest.raises(DataError, match="--data.format"):
        sentence_format("x.xlsx")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("one.conll", "Anna B-PER\nruns\n", r"one\.conll:2: line has one column 'runs'"),
        ("scheme.conll", "Anna B-PER\nruns X-VERB\n", r"scheme\.conll:2: 'X-VERB' is not an IOB2 tag"),
        ("count.jsonl", '{"tokens": ["a", "b"], "tags": ["O"]}\n', r"count\.jsonl:1: sentence has 2 tokens but 1 tags"),
        ("tags.jsonl", '{"tokens": ["a"], "tags": ["S-PER"]}\n', r"tags\.jsonl:1: 'S-PER' is not an IOB2 tag"),
        ("notags.jsonl", '\n{"tokens": ["a"]}\n', r"notags\.jsonl:2: missing field 'tags'"),
        ("empty.conll", "", r"empty\.conll: file is empty"),
        ("blank.conll", "\n\n-DOCSTART- O\n\n", r"blank\.conll: file has no sentences"),
        ("list.jsonl", '{"tokens": [], "tags": []}\n', r"list\.jsonl:1: field 'tokens' is an empty list"),
    ],
)
def test_bad_input_is_one_line_at_file_and_line(write: Write, name: str, content: str, expected: str) -> None:
    """Each problem is a DataError of one line naming the file and (where there is one) the line."""
    with pytest.raises(DataError, match=expected) as info:
        read_sentences(write(name, content), check_tag=IOB2)
    assert "\n" not in str(info.value)


def test_raw_text_cannot_train(write: Write) -> None:
    """Raw text has no tags: reading it as labelled data says so."""
    with pytest.raises(DataError, match="raw text has no tags"):
        read_sentences(write("a.txt", "Anna runs\n"), "text")
