"""Deterministic, seeded train/validation splits."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch

from tetraformer.data.errors import DataError

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

Splittable = TypeVar("Splittable", "Dataset", torch.Tensor, list)


def train_val_split(data: Splittable, val_fraction: float, seed: int = 0) -> tuple[Splittable, Splittable]:
    """Split a Dataset (rows), list or tensor (first dim) into (train, val); each keeps the original order."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be between 0 and 1 (exclusive), got {val_fraction}")
    total = len(data)
    n_val = round(total * val_fraction)
    if n_val == 0:
        raise DataError(f"validation split would be empty: {val_fraction} of {total} examples rounds to 0")
    if n_val == total:
        raise DataError(f"training split would be empty: {val_fraction} of {total} examples rounds to all")
    order = np.random.default_rng(seed).permutation(total)
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
    logger.info("split %d examples into %d train / %d val (seed %d)", total, len(train_idx), n_val, seed)
    return _take(data, train_idx), _take(data, val_idx)


def _take(data: Splittable, indices: np.ndarray) -> Splittable:
    """Rows at the given indices."""
    if isinstance(data, torch.Tensor):
        return data[torch.from_numpy(indices)]
    if isinstance(data, list):
        return [data[i] for i in indices.tolist()]
    return data.select(indices.tolist())
