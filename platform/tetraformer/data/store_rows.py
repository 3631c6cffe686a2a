"""StoreRows: a torch Dataset over a memory-mapped table of a row store, reading rows only when a batch asks.

A batch's rows are read from Arrow in one gather (`__getitems__`, which the DataLoader calls with a batch's
indices); hooks then add what is not stored: label ids from the run's label vocabulary, seeds by position.
`select` gives a subset (train_val_split), `lengths` a list column's row lengths (bucketing) without reading rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.compute as pc
from torch.utils.data import Dataset as TorchDataset

if TYPE_CHECKING:
    from datasets import Dataset

Row = dict[str, Any]
RowHook = Callable[[Row, int, int], None]  # (row, its index in the store table, its position here): adds fields


class StoreRows(TorchDataset):
    """The rows of `table` at `indices` (all, in order, by default), each with `hooks` applied in order.

    Rows carry `columns` (all the table's by default), in that order; those named in `json_columns` hold JSON
    text (records to predict) and are read back as Python values. `memo` is shared by every view of the same
    table: what is computed once per table (a coded label column).
    """

    def __init__(
        self,
        table: Dataset,
        indices: Sequence[int] | np.ndarray | None = None,
        hooks: Mapping[str, RowHook] | None = None,
        json_columns: Sequence[str] = (),
        memo: dict[str, Any] | None = None,
        columns: Sequence[str] | None = None,
    ) -> None:
        self.table = table
        self.indices = np.arange(len(table)) if indices is None else np.asarray(indices, dtype=np.int64)
        self.hooks, self.json_columns = dict(hooks or {}), tuple(json_columns)
        self.memo = {} if memo is None else memo
        self.columns = list(table.column_names if columns is None else columns)
        self._read = table if columns is None else table.select_columns(self.columns)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int) -> Row:
        return self.__getitems__([position])[0]

    def __getitems__(self, positions: Sequence[int]) -> list[Row]:
        """The rows at these positions, read in one gather."""
        index = self.indices[np.asarray(positions, dtype=np.int64)]
        read = self._read[index.tolist()]
        values = zip(*(read[name] for name in self.columns), strict=True)
        rows = [dict(zip(self.columns, row, strict=True)) for row in values]
        for row, stored, position in zip(rows, index.tolist(), positions, strict=True):
            for name in self.json_columns:
                row[name] = json.loads(row[name])
            for hook in self.hooks.values():
                hook(row, stored, int(position))
        return rows

    def __iter__(self) -> Iterator[Row]:
        for start in range(0, len(self), 256):
            yield from self.__getitems__(range(start, min(start + 256, len(self))))

    def select(self, positions: Sequence[int] | np.ndarray) -> StoreRows:
        """The rows at these positions (train_val_split's subsets), with the same hooks."""
        return self._view(self.indices[np.asarray(positions, dtype=np.int64)], self.hooks)

    def with_hook(self, name: str, hook: RowHook | None) -> StoreRows:
        """The same rows with hook `name` set (replaced when there is one; removed when None)."""
        hooks = {k: v for k, v in self.hooks.items() if k != name} | ({name: hook} if hook is not None else {})
        return self._view(self.indices, hooks)

    def _view(self, indices: np.ndarray, hooks: Mapping[str, RowHook]) -> StoreRows:
        """Other rows or hooks of the same table, columns and memo."""
        return StoreRows(self.table, indices, hooks, self.json_columns, self.memo, self.columns)

    def column(self, name: str) -> np.ndarray:
        """A scalar column's values of these rows, as a numpy array (read from Arrow without building rows)."""
        return self.table.data.column(name).to_numpy()[self.indices]

    def location(self, stored: int) -> tuple[str, int]:
        """(file, line) of a stored row, from its `_source` and `_line` columns."""
        data = self.table.data
        return data.column("_source")[stored].as_py(), data.column("_line")[stored].as_py()

    def lengths(self, name: str = "input_ids") -> np.ndarray:
        """The lengths of a list column's values in these rows (bucketing), without reading the lists."""
        return pc.list_value_length(self.table.data.column(name)).to_numpy()[self.indices]


class PositionSeed:
    """A hook setting `field` to `offset` + the row's position: fixed masks / noise for evaluation rows."""

    def __init__(self, field: str, offset: int = 0) -> None:
        self.field, self.offset = field, offset

    def __call__(self, row: Row, stored: int, position: int) -> None:
        row[self.field] = self.offset + position
