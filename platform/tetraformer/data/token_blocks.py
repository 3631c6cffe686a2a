"""Language-modelling blocks read from a corpus store's flat ids by offset: no copy of the corpus in memory.

The `tokens` table's list column is memory-mapped Arrow: each record batch's ids are one contiguous buffer, read
as a numpy view (`CorpusIds`); a block is a slice of one of them, or joined from two where it crosses a batch. The
table is mapped with pyarrow, not `datasets` (`Store.table`): importing `datasets` adds 62 MB to every training
process and DataLoader worker (peak RSS, measured on a 2-core AMD EPYC), and a block needs only the flat ids.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import Dataset

from tetraformer.data.corpus_store import TOKENS, n_tokens
from tetraformer.data.errors import DataError
from tetraformer.data.store import ARROW, Store

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


class CorpusIds:
    """A corpus store's ids as numpy views of its mapped record batches; `slice(start, stop)` reads a range."""

    def __init__(self, store: Store) -> None:
        table = pa.ipc.open_stream(pa.memory_map(str(store.path / f"{TOKENS}{ARROW}"))).read_all()
        column = table.column("input_ids")
        self.chunks = [chunk.flatten().to_numpy(zero_copy_only=True) for chunk in column.chunks if len(chunk)]
        self.starts = list(accumulate((len(chunk) for chunk in self.chunks), initial=0))  # n_chunks + 1 offsets

    def slice(self, start: int, stop: int) -> np.ndarray:
        """Ids [start, stop) as int64, joined across record batches where the range crosses one."""
        first = bisect_right(self.starts, start) - 1
        local, chunk = start - self.starts[first], self.chunks[first]
        if local + stop - start <= len(chunk):
            return chunk[local : local + stop - start].astype(np.int64)
        last = bisect_left(self.starts, stop)
        return np.concatenate([chunk[local:], *self.chunks[first + 1 : last]])[: stop - start].astype(np.int64)


class TokenBlocks(Dataset):
    """Block i of a store is its ids [i * block_size, (i + 1) * block_size + 1) as an int64 tensor (as
    `pack_token_ids` cuts them: block i's last token is block i+1's first); `indices` picks and orders blocks.

    The store is mapped on first read in each process, so DataLoader workers share the page cache, not copies.
    """

    def __init__(self, store: Store, block_size: int, indices: torch.Tensor | None = None) -> None:
        self.store, self.block_size = store, block_size
        n_blocks = block_count(n_tokens(store), block_size)
        self.indices = torch.arange(n_blocks) if indices is None else indices
        self._tokens: CorpusIds | None = None
        if indices is None:
            dropped = n_tokens(store) - (n_blocks * block_size + 1)
            logger.info(
                "%s tokens in %s blocks of %d; %d tail tokens unused",
                f"{n_tokens(store):,}",
                f"{n_blocks:,}",
                block_size + 1,
                dropped,
            )

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> torch.Tensor:
        if self._tokens is None:
            self._tokens = CorpusIds(self.store)
        start = int(self.indices[index]) * self.block_size
        return torch.from_numpy(self._tokens.slice(start, start + self.block_size + 1))

    def subset(self, indices: torch.Tensor) -> TokenBlocks:
        """The blocks at these positions of this dataset's order."""
        return TokenBlocks(self.store, self.block_size, self.indices[indices])

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}  # a worker maps the files itself
