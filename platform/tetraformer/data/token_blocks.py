"""Language-modelling blocks read from a token store by offset: no copy of the corpus in memory."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from tetraformer.data.errors import DataError
from tetraformer.data.token_store import TokenStore

logger = logging.getLogger(__name__)


def block_count(n_tokens: int, block_size: int) -> int:
    """How many blocks of block_size + 1 tokens, one every block_size, a stream holds; a DataError for none."""
    n_blocks = (n_tokens - 1) // block_size
    if n_blocks < 1:
        raise DataError(
            f"corpus too small: {n_tokens} tokens (with end-of-document tokens) but one block needs "
            f"block_size + 1 = {block_size + 1}; add text or lower block_size"
        )
    return n_blocks


class TokenBlocks(Dataset):
    """Block i of a store is its ids [i * block_size, (i + 1) * block_size + 1) as an int64 tensor (as
    `pack_token_ids` cuts them: block i's last token is block i+1's first); `indices` picks and orders blocks.

    The store is mapped on first read in each process, so DataLoader workers share the page cache, not copies.
    """

    def __init__(self, store: TokenStore, block_size: int, indices: torch.Tensor | None = None) -> None:
        self.store, self.block_size = store, block_size
        n_blocks = block_count(store.n_tokens, block_size)
        self.indices = torch.arange(n_blocks) if indices is None else indices
        self._tokens: np.ndarray | None = None
        if indices is None:
            dropped = store.n_tokens - (n_blocks * block_size + 1)
            logger.info(
                "%s tokens in %s blocks of %d; %d tail tokens unused",
                f"{store.n_tokens:,}",
                f"{n_blocks:,}",
                block_size + 1,
                dropped,
            )

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> torch.Tensor:
        if self._tokens is None:
            self._tokens = self.store.tokens()
        start = int(self.indices[index]) * self.block_size
        return torch.from_numpy(self._tokens[start : start + self.block_size + 1].astype(np.int64))

    def subset(self, indices: torch.Tensor) -> TokenBlocks:
        """The blocks at these positions of this dataset's order."""
        return TokenBlocks(self.store, self.block_size, self.indices[indices])

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}  # a worker maps the file itself; a memmap would pickle its data
