"""Static word vectors from a spaCy model package's vocabulary (e.g. ja_ginza: chiVe's 300-dim Japanese vectors,
480k words over 20k rows), as the `vectors.npy` + `words.tsv` directory `--model.word_vectors` reads.

spaCy keeps the table as `vocab/vectors` (a .npy file), each word's row as `vocab/key2row` (a msgpack map from the
word's 64-bit hash to its row) and the words themselves in `vocab/strings.json`; a word's key is MurmurHash64A of
its UTF-8 bytes with seed 1 (spaCy's `hash_string`). Neither spaCy nor msgpack is needed to read them.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

MASK64 = (1 << 64) - 1
MURMUR_M, MURMUR_R = 0xC6A4A7935BD1E995, 47


def murmurhash64a(data: bytes, seed: int = 1) -> int:
    """MurmurHash64A, as spaCy hashes strings (seed 1)."""
    h = (seed ^ (len(data) * MURMUR_M)) & MASK64
    whole = len(data) // 8
    for (k,) in struct.iter_unpack("<Q", data[: whole * 8]):
        k = (k * MURMUR_M) & MASK64
        k ^= k >> MURMUR_R
        k = (k * MURMUR_M) & MASK64
        h = ((h ^ k) * MURMUR_M) & MASK64
    tail = data[whole * 8 :]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * MURMUR_M) & MASK64
    h ^= h >> MURMUR_R
    h = (h * MURMUR_M) & MASK64
    return h ^ (h >> MURMUR_R)


def read_uint_map(data: bytes) -> dict[int, int]:
    """A msgpack map whose keys and values are unsigned integers (spaCy's key2row)."""
    pos, size = _map_header(data)
    out: dict[int, int] = {}
    for _ in range(size):
        key, pos = _uint(data, pos)
        value, pos = _uint(data, pos)
        out[key] = value
    return out


def _map_header(data: bytes) -> tuple[int, int]:
    """(position after the header, entry count) of a msgpack map."""
    first = data[0]
    if first & 0xF0 == 0x80:
        return 1, first & 0x0F
    if first == 0xDE:
        return 3, struct.unpack_from(">H", data, 1)[0]
    if first == 0xDF:
        return 5, struct.unpack_from(">I", data, 1)[0]
    raise ValueError(f"not a msgpack map (first byte 0x{first:02x})")


_UINT_FORMATS = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q"}


def _uint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of a msgpack unsigned integer at `pos`."""
    first = data[pos]
    if first < 0x80:
        return first, pos + 1
    fmt = _UINT_FORMATS.get(first)
    if fmt is None:
        raise ValueError(f"expected an unsigned integer at byte {pos}, found 0x{first:02x}")
    return struct.unpack_from(fmt, data, pos + 1)[0], pos + 1 + struct.calcsize(fmt)


def spacy_vectors(vocab: Path) -> tuple[np.ndarray, dict[str, int]]:
    """(table, word -> row) of a spaCy model's `vocab` folder: every string whose hash has a row."""
    table = np.load(vocab / "vectors", allow_pickle=False)
    key_rows = read_uint_map((vocab / "key2row").read_bytes())
    strings = json.loads((vocab / "strings.json").read_text(encoding="utf-8"))
    rows = {}
    for word in strings:
        row = key_rows.get(murmurhash64a(word.encode("utf-8")))
        if row is not None and word.strip() and not any(c in word for c in "\t\n\r"):
            rows[word] = row
    return table, rows
