"""iter_records / read_records: JSONL, JSON arrays, CSV and TSV with file:line errors."""

import pytest

from tetraformer.data import DataError, infer_format, iter_records, read_records


def test_csv_rows_with_quoted_newlines_keep_start_lines(write) -> None:
    path = write("d.csv", 'text,label\nhello,pos\n"two\nlines",neg\n\nlast,pos\n')
    records = list(iter_records(path, required_fields=["text", "label"]))
    assert [(r.data, r.line) for r in records] == [
        ({"text": "hello", "label": "pos"}, 2),
        ({"text": "two\nlines", "label": "neg"}, 3),
        ({"text": "last", "label": "pos"}, 6),
    ]


def test_csv_header_missing_column_lists_columns_found(write) -> None:
    path = write("d.csv", "sentence,y\na,1\n")
    with pytest.raises(DataError) as info:
        list(iter_records(path, required_fields=["text", "y"]))
    assert str(info.value) == f"{path}:1: header is missing column 'text' (columns found: 'sentence', 'y')"


def test_csv_row_with_wrong_field_count(write) -> None:
    path = write("d.csv", "text,label\na,1\nb,2,extra\n")
    with pytest.raises(DataError, match=r"d\.csv:3: row has 3 fields but the header has 2"):
        list(iter_records(path))


def test_tsv_quotes_are_literal(write) -> None:
    path = write("d.tsv", 'source\ttarget\n"Hallo" Welt\t"Hello" world\n')
    (record,) = iter_records(path, required_fields=["source", "target"])
    assert record.data == {"source": '"Hallo" Welt', "target": '"Hello" world'}


def test_json_array_records_know_their_lines(write) -> None:
    path = write("d.json", '[\n  {"text": "a"},\n  {"text": "b",\n   "label": 1}, {"text": "c"}\n]\n')
    assert [(r.data["text"], r.line) for r in iter_records(path)] == [("a", 2), ("b", 3), ("c", 4)]


def test_json_array_syntax_error_has_line(write) -> None:
    path = write("d.json", '[\n  {"text": "a"},\n  {"text": "b" "x"}\n]\n')
    with pytest.raises(DataError, match=r"d\.json:3: not valid JSON: expecting ',' delimiter at column 16$"):
        list(iter_records(path))


def test_json_suffix_also_reads_json_lines(write) -> None:
    path = write("d.json", '{"text": "a"}\n{"text": "b"}\n')
    assert [r.line for r in iter_records(path)] == [1, 2]


def test_jsonl_value_must_be_an_object(write) -> None:
    with pytest.raises(DataError, match=r"d\.jsonl:2: expected a JSON object, got array"):
        list(iter_records(write("d.jsonl", '{"a": 1}\n[1, 2]\n')))


def test_record_error_locates_the_row(write) -> None:
    (record,) = iter_records(write("d.jsonl", '{"label": "maybe"}\n'))
    assert str(record.error("unknown label 'maybe'")).endswith("d.jsonl:1: unknown label 'maybe'")


def test_unknown_suffix(write) -> None:
    with pytest.raises(DataError, match=r"cannot tell the format from suffix '\.xml'"):
        infer_format(write("d.xml", "<a/>"))


def test_read_records_keeps_required_columns_and_location(write) -> None:
    path = write("d.jsonl", '{"text": "a", "label": 1, "id": 9}\n{"text": "b", "label": 0}\n')
    ds = read_records(path, required_fields=["text", "label"])
    assert ds.column_names == ["text", "label", "_source", "_line"]
    assert ds["label"][:] == [1, 0]
    assert ds["_line"][:] == [1, 2]


def test_read_records_rejects_differing_fields_and_types(write) -> None:
    with pytest.raises(DataError, match=r"a\.jsonl:2: fields 'text' differ from 'text', 'label'"):
        read_records(write("a.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n'))
    with pytest.raises(DataError, match=r"b\.jsonl:2: field 'label' is a string here but a number at .*b\.jsonl:1"):
        read_records(write("b.jsonl", '{"label": 1}\n{"label": "x"}\n'))


@pytest.mark.parametrize("ending", ["\n", "\r\n", "  \n"])
def test_jsonl_error_at_the_end_of_a_line_names_its_column(write, ending: str) -> None:
    """json places an error at a line's end on the next line's column 1: the reader names the line's own column."""
    path = write("d.jsonl", f'{{"text": "a"}}{ending}  {{"text": "b",{ending}{{"text": "c"}}{ending}')
    with pytest.raises(DataError) as info:
        list(iter_records(path))
    assert str(info.value) == (
        f"{path}:2: line is not valid JSON: expecting property name enclosed in double quotes at column 16 "
        "(the line ends there: a JSON lines file holds one whole object per line)"
    )
