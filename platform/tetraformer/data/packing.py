"""Tokenize documents and pack them into fixed-length blocks for language modelling."""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedTokenizerBase

from tetraformer.data.errors import DataError

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)


def pack_documents(
    texts: Dataset | Iterable[str],
    tokenizer: PreTrainedTokenizerBase,
    block_size: int,
    text_column: str = "text",
    batch_size: int = 1000,
) -> torch.Tensor:
    """Tokenize texts (a Dataset's text column or strings) and pack them: a (N, block_size + 1) LongTensor."""
    if isinstance(texts, str):
        raise TypeError("pack_documents takes a Dataset or an iterable of documents, not one string")
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no eos token to separate documents")
    batches = _text_batches(texts, text_column, batch_size)
    documents = (ids for batch in batches for ids in tokenizer(batch, add_special_tokens=False)["input_ids"])
    return pack_token_ids(documents, block_size, tokenizer.eos_token_id)


def pack_token_ids(documents: Iterable[Sequence[int]], block_size: int, eos_id: int) -> torch.Tensor:
    """Concatenate documents, each followed by eos, and cut (N, block_size + 1) blocks; the tail is dropped.

    Blocks start every block_size tokens, so block i's last token is block i+1's first: with
    inputs = block[:-1] and targets = block[1:], every token after the first is a target exactly once.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    stream = array("q")
    for ids in documents:
        stream.extend(ids)
        stream.append(eos_id)
    n_blocks = (len(stream) - 1) // block_size
    if n_blocks < 1:
        raise DataError(
            f"corpus too small: {len(stream)} tokens (with end-of-document tokens) but one block needs "
            f"block_size + 1 = {block_size + 1}; add text or lower block_size"
        )
    used = n_blocks * block_size + 1
    logger.info(
        "packed %d tokens into %d blocks of %d; dropped %d tail tokens",
        len(stream),
        n_blocks,
        block_size + 1,
        len(stream) - used,
    )
    tokens = torch.frombuffer(stream, dtype=torch.long, count=used)
    return tokens.unfold(0, block_size + 1, block_size).clone()  # (N, block_size + 1), owns its memory


def _text_batches(texts: Dataset | Iterable[str], column: str, batch_size: int) -> Iterator[list[str]]:
    """Lists of up to batch_size strings from a Dataset column or an iterable of strings."""
    from datasets import Dataset

    if isinstance(texts, Dataset):
        if column not in texts.column_names:
            raise DataError(f"dataset has no column {column!r} (columns: {', '.join(texts.column_names)})")
        yield from (batch[column] for batch in texts.select_columns(column).iter(batch_size=batch_size))
        return
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch
