"""train_val_split: seeded, deterministic, disjoint, and never empty."""

import pytest
import torch
from datasets import Dataset

from tetraformer.data import DataError, train_val_split


@pytest.fixture
def numbers() -> Dataset:
    return Dataset.from_dict({"x": list(range(100))})


def test_same_seed_same_split(numbers) -> None:
    first = train_val_split(numbers, 0.2, seed=7)
    second = train_val_split(numbers, 0.2, seed=7)
    assert first[0]["x"][:] == second[0]["x"][:]
    assert first[1]["x"][:] == second[1]["x"][:]
    assert train_val_split(numbers, 0.2, seed=8)[1]["x"][:] != first[1]["x"][:]


def test_split_is_disjoint_complete_and_ordered(numbers) -> None:
    train, val = train_val_split(numbers, 0.2, seed=0)
    assert (len(train), len(val)) == (80, 20)
    assert sorted(train["x"][:] + val["x"][:]) == list(range(100))
    assert val["x"][:] == sorted(val["x"][:])


def test_tensor_rows() -> None:
    blocks = torch.arange(30).reshape(10, 3)
    train, val = train_val_split(blocks, 0.3, seed=1)
    assert train.shape == (7, 3) and val.shape == (3, 3)
    assert torch.equal(torch.cat([train, val]).sort(dim=0).values, blocks)


def test_empty_val_or_train_is_an_error(numbers) -> None:
    small = numbers.select(range(3))
    with pytest.raises(DataError, match="validation split would be empty: 0.1 of 3 examples"):
        train_val_split(small, 0.1, seed=0)
    with pytest.raises(DataError, match="training split would be empty"):
        train_val_split(small, 0.9, seed=0)
    with pytest.raises(ValueError, match="val_fraction must be between 0 and 1"):
        train_val_split(small, 1.0, seed=0)


def test_lists_split_like_tensors() -> None:
    """A list splits into the same rows as a tensor of its indices with the same seed."""
    rows = list(range(50))
    train, val = train_val_split(rows, 0.2, seed=5)
    t_train, t_val = train_val_split(torch.arange(50), 0.2, seed=5)
    assert train == t_train.tolist() and val == t_val.tolist()
