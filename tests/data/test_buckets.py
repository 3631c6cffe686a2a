"""LengthBuckets: every row once per epoch, batches of similar length, a new order each epoch."""

from __future__ import annotations

import random

from tetraformer.data.buckets import LengthBuckets


def test_every_row_once_in_batches_of_similar_length() -> None:
    """Each index appears exactly once; sorted pools make batches far more uniform than random ones."""
    lengths = [random.Random(i).randint(1, 500) for i in range(1000)]
    sampler = LengthBuckets(lengths, batch_size=10, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 100
    assert sorted(i for b in batches for i in b) == list(range(1000))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
    assert spread < 50  # random batches of 10 from 1..500 spread about 400


def test_epochs_reshuffle() -> None:
    """set_epoch changes the order; the same epoch repeats it."""
    sampler = LengthBuckets(list(range(100)), batch_size=7, seed=0)
    first = list(sampler)
    assert list(sampler) == first
    sampler.set_epoch(1)
    assert list(sampler) != first
