"""DataError formatting and pickling."""

import pickle

from tetraformer.data import DataError


def test_formats_path_and_line() -> None:
    err = DataError("line is not valid JSON (Expecting ',' delimiter)", "data/train.jsonl", 17)
    assert str(err) == "data/train.jsonl:17: line is not valid JSON (Expecting ',' delimiter)"
    assert (err.path, err.line) == ("data/train.jsonl", 17)


def test_formats_without_line_or_path() -> None:
    assert str(DataError("file is empty", "a.txt")) == "a.txt: file is empty"
    assert str(DataError("no data files given")) == "no data files given"


def test_is_a_value_error_and_survives_pickling() -> None:
    err = pickle.loads(pickle.dumps(DataError("bad", "x.csv", 3)))
    assert isinstance(err, ValueError)
    assert (str(err), err.path, err.line, err.message) == ("x.csv:3: bad", "x.csv", 3, "bad")
