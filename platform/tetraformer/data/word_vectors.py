"""Static word vectors (word2vec, fastText, GloVe, chiVe; spaCy's pruned tables): the reader and its two formats.

- Text: one word per line followed by its numbers, separated by spaces (`.vec`, `.txt`); an optional first
  line `COUNT DIMS` (word2vec's and fastText's header) is skipped; the first vector line sets the count of
  numbers, and what comes before a line's last numbers is its word (GloVe has words with spaces). The first line
  of a word wins.
- A directory holding `vectors.npy` (rows, dims) and `words.tsv` (`word<TAB>row` per line): a table where
  many words share a row, as spaCy's pruned vectors do (`write_word_vectors` writes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tetraformer.data.errors import DataError
from tetraformer.data.lines import iter_lines

TABLE_FILE, WORDS_FILE = "vectors.npy", "words.tsv"


@dataclass(frozen=True)
class WordVectors:
    """A (rows, dims) float32 table and each word's row in it."""

    table: np.ndarray
    rows: dict[str, int]

    @property
    def dims(self) -> int:
        """The vectors' length."""
        return int(self.table.shape[1])

    def vector_rows(self, words: list[str]) -> tuple[list[int], list[int]]:
        """(positions in `words` that have a vector, their rows in the table)."""
        found = [(i, self.rows[w]) for i, w in enumerate(words) if w and w in self.rows]
        return [i for i, _ in found], [r for _, r in found]


def read_word_vectors(path: str | Path) -> WordVectors:
    """The vectors of a text file or a `vectors.npy` + `words.tsv` directory; a DataError names a bad line."""
    path = Path(path)
    if not path.exists():
        raise DataError("no such word-vectors file or directory", path)
    vectors = _read_table_dir(path) if path.is_dir() else _read_text(path)
    if not vectors.rows:
        raise DataError("holds no word vectors", path)
    return vectors


def write_word_vectors(out: str | Path, table: np.ndarray, rows: dict[str, int]) -> None:
    """Write a table and each word's row as a `vectors.npy` + `words.tsv` directory."""
    bad = next((w for w in rows if not w or any(c in w for c in "\t\n\r")), None)
    if bad is not None:
        raise ValueError(f"a word of a words.tsv cannot be empty or hold a tab or line break: {bad!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / TABLE_FILE, np.asarray(table, dtype=np.float32))
    with (out / WORDS_FILE).open("w", encoding="utf-8") as handle:
        handle.writelines(f"{word}\t{row}\n" for word, row in rows.items())


def _read_text(path: Path) -> WordVectors:
    """word2vec / fastText / GloVe text: `word x1 ... xD` per line, after an optional `COUNT DIMS` header."""
    words: dict[str, int] = {}
    values: list[np.ndarray] = []
    dims = 0
    for number, line in iter_lines(path):
        fields = line.rstrip("\r\n").rstrip(" ").split(" ")
        if number == 1 and len(fields) == 2 and all(f.isdigit() for f in fields):
            continue  # the header
        if fields == [""]:
            continue
        dims = dims or len(fields) - 1
        if dims < 1:
            raise DataError("expected a word and its numbers, found one field", path, number)
        if len(fields) < dims + 1:
            raise DataError(f"expected a word and {dims} numbers, found {len(fields)} fields", path, number)
        word = " ".join(fields[:-dims])  # GloVe's 840B file has words with spaces: the last `dims` fields are numbers
        try:
            vector = np.asarray(fields[-dims:], dtype=np.float32)
        except ValueError:
            raise DataError(f"the vector of {word!r} holds something that is not a number", path, number) from None
        if word not in words:
            words[word] = len(values)
            values.append(vector)
    table = np.stack(values) if values else np.zeros((0, 0), np.float32)
    return WordVectors(table, words)


def _read_table_dir(path: Path) -> WordVectors:
    """A `vectors.npy` table and the `words.tsv` that gives each word's row."""
    for name in (TABLE_FILE, WORDS_FILE):
        if not (path / name).is_file():
            raise DataError(f"a word-vectors directory needs {TABLE_FILE} and {WORDS_FILE}; {name} is missing", path)
    table = np.load(path / TABLE_FILE)
    if table.ndim != 2:
        raise DataError(f"expected a (rows, dims) table, found shape {table.shape}", path / TABLE_FILE)
    words: dict[str, int] = {}
    for number, line in iter_lines(path / WORDS_FILE):
        word, tab, row = line.rstrip("\r\n").rpartition("\t")
        if not tab or not word or not row.isdigit() or int(row) >= len(table):
            raise DataError(f"expected `word<TAB>row` with a row below {len(table)}", path / WORDS_FILE, number)
        words.setdefault(word, int(row))
    return WordVectors(table.astype(np.float32, copy=False), words)
