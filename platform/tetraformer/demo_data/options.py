"""What every demo-data builder receives and returns: the options, the caps, the counts of what it wrote."""

from __future__ import annotations

from dataclasses import dataclass

Counts = dict[str, int]  # output path relative to the data folder -> lines, rows, sentences or images
DEFAULT_SEED = 1234


@dataclass(frozen=True)
class Options:
    """Settings every builder receives."""

    seed: int = DEFAULT_SEED
    limit: int | None = None  # None: the dataset's default cap; 0: no cap


def cap(limit: int | None, default: int | None) -> int | None:
    """The effective cap: the dataset default, the user's --limit, or None for no cap."""
    value = default if limit is None else limit
    return value or None
