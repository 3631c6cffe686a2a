"""Raw label columns of a row store, encoded by a LabelVocabulary when the data is set up, without reading rows.

A store keeps labels as the data had them (JSON text of each value, or tag strings), so the vocabulary that
encodes them is chosen at run time: the training split's, `--data.labels`, or a checkpoint's. A column is read
once into a code per row (its distinct value's number, `dictionary_encode`); the vocabulary then encodes each
distinct value once, at the first row that has it, so an unknown label is a DataError at that row's file and line
(the first such row, as reading the rows in order would find), and a row's label id is a lookup.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from tetraformer.data.labels import LabelVocabulary

Where = Callable[[int], tuple[str, int]]  # a value's index in the column -> (file, line)


@dataclass(frozen=True)
class LabelColumn:
    """A column's distinct values (decoded) and, per entry, the number of its value."""

    values: list[Any]
    codes: np.ndarray
    where: Where

    @classmethod
    def of(cls, column: pa.ChunkedArray | pa.Array, where: Where, decode: bool = True) -> LabelColumn:
        """Code a column (JSON text when `decode`, else plain values, e.g. tags)."""
        encoded = (column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column).dictionary_encode()
        values = encoded.dictionary.to_pylist()
        return cls([json.loads(v) for v in values] if decode else values, encoded.indices.to_numpy(), where)

    def distinct(self, entries: np.ndarray) -> list[tuple[Any, int]]:
        """The distinct values among `entries` (indices into the column) in order of first appearance, each with
        the entry where it first appears."""
        present, first = np.unique(self.codes[entries], return_index=True)
        order = np.argsort(first)
        return [(self.values[present[k]], int(entries[first[k]])) for k in order]

    def vocabulary(self, entries: np.ndarray, multi_label: bool = False) -> LabelVocabulary:
        """The sorted labels of these entries (LabelVocabulary.from_data, errors at their file and line)."""
        found = self.distinct(entries)
        return LabelVocabulary.from_data([v for v, _ in found], multi_label, [self.where(e) for _, e in found])

    def encode(self, vocabulary: LabelVocabulary, entries: np.ndarray) -> LabelIds:
        """The label ids of these entries; a DataError at the first entry whose label the vocabulary lacks."""
        table: list[Any] = [None] * len(self.values)
        for value, entry in self.distinct(entries):
            table[self.codes[entry]] = vocabulary.encode(value, *self.where(entry))
        return LabelIds(table, self.codes)

    def tags(self, entries: np.ndarray) -> Iterable[Any]:
        """The distinct values among these entries (e.g. every tag a split uses)."""
        return (value for value, _ in self.distinct(entries))


@dataclass(frozen=True)
class LabelIds:
    """Each column entry's label id (an int, or a multi-hot long tensor for multi-label vocabularies)."""

    table: list[Any]  # by code: what the vocabulary encoded the value to (None for values not encoded)
    codes: np.ndarray

    def __getitem__(self, entry: int) -> Any:
        found = self.table[self.codes[entry]]
        return found.clone() if isinstance(found, torch.Tensor) else found

    def ids(self) -> np.ndarray:
        """Every entry's single-label id as an int64 array (-1 where the value was not encoded)."""
        lookup = np.asarray([-1 if v is None else v for v in self.table], dtype=np.int64)
        return lookup[self.codes]

    def counts(self, entries: np.ndarray, n_labels: int) -> list[int]:
        """How many of these entries carry each label id (multi-hot rows count once per label)."""
        per_code = np.bincount(self.codes[entries], minlength=len(self.table))
        counts = np.zeros(n_labels, dtype=np.int64)
        for code, value in enumerate(self.table):
            if value is None or not per_code[code]:
                continue
            if isinstance(value, torch.Tensor):
                counts += per_code[code] * value.numpy()
            else:
                counts[value] += per_code[code]
        return counts.tolist()

    def hook(self, field: str = "labels") -> Callable[[dict[str, Any], int, int], None]:
        """A StoreRows hook setting `field` to the row's label id (rows index the column)."""
        return _LabelHook(self, field)


@dataclass(frozen=True)
class _LabelHook:
    """Sets a row's label id from its index in the store (picklable, for DataLoader workers)."""

    ids: LabelIds
    field: str

    def __call__(self, row: dict[str, Any], stored: int, position: int) -> None:
        row[self.field] = self.ids[stored]
