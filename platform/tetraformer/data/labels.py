"""LabelVocabulary: label strings <-> ids for single- and multi-label data, saved with the checkpoint."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from tetraformer.data.errors import DataError

SHOWN_LABELS = 20  # an unknown-label error lists at most this many known labels


class LabelVocabulary:
    """An ordered list of label names; encodes a label (or a list of labels, multi-hot) to ids and back."""

    def __init__(self, labels: Sequence[str], multi_label: bool = False) -> None:
        names = [str(label) for label in labels]
        repeated = sorted(name for name, count in Counter(names).items() if count > 1)
        if repeated:
            raise DataError(f"label vocabulary repeats {', '.join(map(repr, repeated))}")
        if not names:
            raise DataError("label vocabulary is empty")
        self.names, self.multi_label = names, multi_label
        self.ids = {name: i for i, name in enumerate(names)}

    @classmethod
    def from_data(
        cls,
        values: Iterable[Any],
        multi_label: bool = False,
        locations: Iterable[tuple[str, int]] | None = None,
    ) -> LabelVocabulary:
        """The sorted unique labels of a training split (each value a label, or a list if multi-label).

        `locations` gives each value's (file, line) for errors; without it, errors name the row number.
        """
        where = iter(locations) if locations is not None else ((None, row) for row in itertools.count(1))
        seen: set[str] = set()
        for value, (path, line) in zip(values, where, strict=False):  # `where` may be endless
            seen.update(_as_labels(value, multi_label, path, line))
        if not seen:
            raise DataError("no labels found in the training data")
        return cls(sorted(seen), multi_label)

    def __len__(self) -> int:
        return len(self.names)

    def __eq__(self, other: object) -> bool:
        """Same names in the same order, and the same single- or multi-label reading."""
        if not isinstance(other, LabelVocabulary):
            return NotImplemented
        return (self.names, self.multi_label) == (other.names, other.multi_label)

    __hash__ = None  # type: ignore[assignment]  (mutable-looking: compared by value, never hashed)

    def __repr__(self) -> str:
        return f"LabelVocabulary({self.names!r}, multi_label={self.multi_label})"

    def encode(self, value: Any, path: str | Path | None = None, line: int | None = None) -> int | torch.Tensor:
        """A label's id, or a (num_labels,) long multi-hot for a list of labels; unknown labels: DataError."""
        labels = _as_labels(value, self.multi_label, path, line)
        unknown = [label for label in labels if label not in self.ids]
        if unknown:
            raise _error(f"unknown label {unknown[0]!r}; known labels: {self.describe()}", path, line)
        if not self.multi_label:
            return self.ids[labels[0]]
        hot = torch.zeros(len(self.names), dtype=torch.long)  # (C,)
        hot[[self.ids[label] for label in labels]] = 1
        return hot

    def encode_sequence(
        self, values: Sequence[Any], path: str | Path | None = None, line: int | None = None
    ) -> list[int]:
        """Ids of a sequence of single labels (e.g. one tag per token); unknown labels: DataError."""
        if self.multi_label:
            raise ValueError("encode_sequence is for single-label vocabularies; use encode for multi-label")
        if not isinstance(values, list | tuple):
            raise _error(f"expected a list of labels, got {values!r}", path, line)
        return [int(self.encode(value, path, line)) for value in values]

    def decode(self, ids: int | Sequence[int] | torch.Tensor) -> str | list[str]:
        """A label name from an id; for a multi-label vocabulary, the names set in a multi-hot vector."""
        if not self.multi_label:
            return self.names[int(ids)]
        hot = torch.as_tensor(ids)
        return [self.names[i] for i in hot.nonzero().flatten().tolist()]

    def describe(self) -> str:
        """The known labels as a short comma-separated list (long vocabularies are cut with a count)."""
        shown = ", ".join(map(repr, self.names[:SHOWN_LABELS]))
        more = len(self.names) - SHOWN_LABELS
        return f"{shown} (and {more} more)" if more > 0 else shown

    def state(self) -> dict[str, Any]:
        """Plain data for the checkpoint (a DataSpec's labels)."""
        return {"labels": list(self.names), "multi_label": self.multi_label}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LabelVocabulary:
        """Rebuild a vocabulary saved by `state`."""
        return cls(state["labels"], bool(state.get("multi_label", False)))


def _as_labels(value: Any, multi_label: bool, path: str | Path | None, line: int | None) -> list[str]:
    """A value's labels as strings: one for single-label data, a list (possibly empty) for multi-label."""
    if multi_label:
        if not isinstance(value, list | tuple):
            raise _error(f"expected a list of labels, got {value!r}", path, line)
        items = list(value)
    else:
        if isinstance(value, list | tuple | dict):
            raise _error(f"expected one label, got {value!r} (multi-label data needs multi_label)", path, line)
        items = [value]
    for item in items:
        if item is None or (isinstance(item, str) and not item.strip()):
            raise _error("empty label", path, line)
    return [str(item) for item in items]


def _error(message: str, path: str | Path | None, line: int | None) -> DataError:
    """A DataError at `path:line`, or at `row N` when the values come without a file."""
    if path is None and line is not None:
        return DataError(f"row {line}: {message}")
    return DataError(message, path, line)
