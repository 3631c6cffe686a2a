"""LengthBuckets: a batch sampler that groups rows of similar length, so padding to the batch's longest stays small."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler

POOL_BATCHES = 50  # rows are sorted by length within shuffled pools of this many batches


class LengthBuckets(Sampler[list[int]]):
    """Shuffle rows, sort each pool of POOL_BATCHES batches by length, cut it into batches, shuffle the batches.

    Every epoch draws a new order from `seed` + epoch (Lightning calls `set_epoch`); every row is used once.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.lengths, self.batch_size, self.seed, self.epoch = list(lengths), batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """Use the order of this epoch."""
        self.epoch = epoch

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        pool = self.batch_size * POOL_BATCHES
        batches: list[list[int]] = []
        for start in range(0, len(order), pool):
            rows = sorted(order[start : start + pool], key=self.lengths.__getitem__)
            batches += [rows[i : i + self.batch_size] for i in range(0, len(rows), self.batch_size)]
        for index in torch.randperm(len(batches), generator=generator).tolist():
            yield batches[index]
