"""iter_lines: strict decoding with the line number and byte offset of bad bytes."""

import pytest

from tetraformer.data import DataError, iter_lines


def test_lines_keep_their_endings(write) -> None:
    path = write("a.txt", b"one\r\ntwo\n\nfour")
    assert list(iter_lines(path)) == [(1, "one\r\n"), (2, "two\n"), (3, "\n"), (4, "four")]


def test_utf8_bom_is_dropped(write) -> None:
    path = write("bom.csv", "\ufefftext,label\n".encode())
    assert list(iter_lines(path)) == [(1, "text,label\n")]


def test_undecodable_byte_names_line_and_offset(write) -> None:
    data = b"hello\nw\xc3\xb6rld\n\nline \xff four\n"
    path = write("bad.txt", data)
    with pytest.raises(DataError) as info:
        list(iter_lines(path))
    assert info.value.line == 4
    assert data.index(b"\xff") == 19
    assert str(info.value).startswith(f"{path}:4: cannot decode byte 0xff at byte offset 19 as utf-8")


def test_truncated_character_at_end_of_file(write) -> None:
    path = write("cut.txt", b"ok\nabc\xe2\x82")
    with pytest.raises(DataError, match=r"cut\.txt:2: cannot decode byte 0xe2 at byte offset 6"):
        list(iter_lines(path))


def test_other_encodings(write) -> None:
    path = write("latin.txt", "café\nzoë\n".encode("latin-1"))
    assert [line for _, line in iter_lines(path, "latin-1")] == ["café\n", "zoë\n"]
    path = write("wide.txt", "a\nbé\n".encode("utf-16"))
    assert list(iter_lines(path, "utf-16")) == [(1, "a\n"), (2, "bé\n")]
