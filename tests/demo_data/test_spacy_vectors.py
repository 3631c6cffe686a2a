"""Tests for reading a spaCy model's vectors (tetraformer.demo_data.spacy_vectors, `demo-data ja_vectors`) from a
handmade vocab folder: spaCy's string hashes, its msgpack key2row, and the directory --model.word_vectors reads."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from tetraformer.data.word_vectors import read_word_vectors
from tetraformer.demo_data import japanese
from tetraformer.demo_data import spacy_vectors as pv
from tetraformer.demo_data.options import Options


def test_hash_is_spacys() -> None:
    """The hashes spaCy's documentation prints for "coffee" and "apple" (tails of 6 and 5 bytes, no full block),
    and one over a full 8-byte block."""
    assert pv.murmurhash64a(b"coffee") == 3197928453018144401
    assert pv.murmurhash64a(b"apple") == 8566208034543834098
    assert pv.murmurhash64a(b"12345678") != pv.murmurhash64a(b"12345679")


def msgpack_uint_map(entries: dict[int, int]) -> bytes:
    """A msgpack map16 of uint64 keys and values of every unsigned width."""
    out = bytearray(b"\xde" + struct.pack(">H", len(entries)))
    for key, value in entries.items():
        out += b"\xcf" + struct.pack(">Q", key)
        if value < 0x80:
            out += bytes([value])
        elif value < 0x100:
            out += b"\xcc" + bytes([value])
        else:
            out += b"\xcd" + struct.pack(">H", value)
    return bytes(out)


def test_uint_map_widths_and_refusals() -> None:
    """Fixints, uint8 and uint16 values read back; a fixmap works; something else is refused."""
    entries = {1: 5, 2**63: 200, 7: 300}
    assert pv.read_uint_map(msgpack_uint_map(entries)) == entries
    assert pv.read_uint_map(b"\x81\x01\x02") == {1: 2}
    with pytest.raises(ValueError, match="not a msgpack map"):
        pv.read_uint_map(b"\x90")
    with pytest.raises(ValueError, match="expected an unsigned integer"):
        pv.read_uint_map(b"\x81\xa1x\x02")


def spacy_vocab(root: Path) -> Path:
    """A spaCy-style vocab folder: 3 rows, 4 words with rows (two share one), a string without a row."""
    vocab = root / "ja_ginza" / "ja_ginza-5.3.0" / "vocab"
    vocab.mkdir(parents=True)
    with (vocab / "vectors").open("wb") as handle:  # spaCy's file has no .npy suffix
        np.save(handle, np.arange(6, dtype=np.float32).reshape(3, 2))
    rows = {"東京": 0, "大阪": 1, "おおさか": 1, "京都": 2}
    keys = {pv.murmurhash64a(word.encode("utf-8")): row for word, row in rows.items()}
    (vocab / "key2row").write_bytes(msgpack_uint_map(keys))
    strings = [*rows, "no-row", "a\tb"]
    (vocab / "strings.json").write_text(json.dumps(strings, ensure_ascii=False), encoding="utf-8")
    return vocab


def test_spacy_vectors_and_the_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every string with a row keeps it; the dataset writes a directory the reader gives the same vectors."""
    vocab = spacy_vocab(tmp_path / "pkg")
    table, rows = pv.spacy_vectors(vocab)
    assert rows == {"東京": 0, "大阪": 1, "おおさか": 1, "京都": 2}
    monkeypatch.setattr(japanese, "pip_package_dir", lambda dist, module: tmp_path / "pkg" / "ja_ginza")
    counts = japanese.build_ja_vectors(tmp_path / "data", Options())
    assert counts == {"ja_vectors/words.tsv": 4, "ja_vectors/vectors.npy": 3}
    vectors = read_word_vectors(tmp_path / "data" / "ja_vectors")
    np.testing.assert_array_equal(vectors.table[vectors.rows["おおさか"]], table[1])
