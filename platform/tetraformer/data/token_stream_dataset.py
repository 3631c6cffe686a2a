"""Language-modelling batches from a corpus read as a stream: tokenized on the fly, packed, sharded, resumable.

The training data is split into *shares*, one per data-parallel rank and DataLoader worker (rank r's worker w
reads share r * workers + w). Each share reads its part of the sources pass after pass without end (a run is
bounded by --trainer.max_steps), so every rank always has a next batch and DDP never waits on a rank that ran
out. In each pass the files are taken in an order drawn from (seed, pass); with at least as many files as shares,
share s reads every n-th file of that order, else every n-th document. Its documents are tokenized in batches
(eos after each) and cut into blocks of block_size + 1 ids, one every block_size ids, as `TokenBlocks` cuts a
store (block i's last id is block i+1's first; a pass's tail shorter than a block is dropped). Blocks are
shuffled within windows of `shuffle_blocks` consecutive blocks, each in an order drawn from (seed, pass, share,
window); no draw touches the global RNG. Each batch comes with its share's state after it (`ShareState`: pass,
window, where the window starts, blocks of it served), from which `resume` reads again the next batch exactly.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from itertools import islice
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from tetraformer.data.corpus_store import Source
from tetraformer.data.errors import DataError
from tetraformer.data.stream_sources import numbered_pieces, one_document
from tetraformer.data.token_stream import BATCH_CHARS, BATCH_TEXTS, batch_encoder

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Position:
    """Where a share's next block starts in a pass: its file (in the share's order), the piece in that file, the id
    in the piece's ids, and how many documents the share's pass had seen before that piece."""

    file: int = 0
    piece: int = 0
    token: int = 0
    documents: int = 0


@dataclass(frozen=True)
class ShareState:
    """A share's place in its stream: the pass, the shuffle window, where the window starts, its blocks served."""

    epoch: int = 0
    window: int = 0
    start: Position = field(default_factory=Position)
    served: int = 0

    def to_dict(self) -> dict[str, int]:
        """Plain ints, for a checkpoint."""
        return {"epoch": self.epoch, "window": self.window, "served": self.served, **asdict(self.start)}

    @classmethod
    def from_dict(cls, state: dict[str, int]) -> ShareState:
        """The state `to_dict` wrote."""
        start = Position(state["file"], state["piece"], state["token"], state["documents"])
        return cls(state["epoch"], state["window"], start, state["served"])


@dataclass(frozen=True)
class Share:
    """Which share of the stream a reader is: `index` of `count`."""

    index: int = 0
    count: int = 1


class TokenStream(IterableDataset):
    """Endless ({"input_ids": (batch_size, block_size + 1) int64}, share state after it) pairs of one share.

    `sources` are the files with the first piece training reads of each (after a held-out part). The loader
    (`StreamLoader`) calls `assign` before iterating: the data-parallel rank and world size, how DataLoader workers
    map to shares, and the states to resume each share from.
    """

    def __init__(
        self,
        sources: list[Source],
        read_options: dict[str, Any],
        tokenizer: Any,
        block_size: int,
        batch_size: int,
        seed: int = 0,
        shuffle_blocks: int = 1024,
    ) -> None:
        super().__init__()
        if not sources:
            raise DataError("no training files to stream")
        if tokenizer.eos_token_id is None:
            raise DataError("the tokenizer has no eos token to separate documents")
        self.sources, self.read_options, self.tokenizer = sources, read_options, tokenizer
        self.block_size, self.batch_size, self.seed, self.shuffle_blocks = block_size, batch_size, seed, shuffle_blocks
        self.rank, self.world, self.workers, self.rotation = 0, 1, 1, 0
        self.states: dict[int, ShareState] = {}

    def assign(self, rank: int, world: int, workers: int, rotation: int, states: dict[int, ShareState]) -> None:
        """Read as `rank` of `world` with `workers` workers a rank; DataLoader worker i reads logical worker
        (i + rotation) % workers, each share from its state in `states` (else from the start)."""
        self.rank, self.world, self.workers, self.rotation, self.states = rank, world, workers, rotation, states

    def share(self) -> Share:
        """The share this process reads (its rank's, and its worker's)."""
        info = get_worker_info()
        worker = 0 if info is None else (info.id + self.rotation) % self.workers
        return Share(self.rank * self.workers + worker, self.world * self.workers)

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], dict[str, int]]]:
        share = self.share()
        blocks = self.blocks(share, self.states.get(share.index, ShareState()))
        while True:
            chunk = list(islice(blocks, self.batch_size))
            ids = torch.from_numpy(np.stack([block for block, _ in chunk]).astype(np.int64))
            yield {"input_ids": ids}, chunk[-1][1].to_dict()

    # --- blocks of a share, pass after pass ----------------------------------------------------------
    def blocks(self, share: Share, state: ShareState) -> Iterator[tuple[np.ndarray, ShareState]]:
        """The share's blocks from `state` on, endlessly, each with the state after it."""
        window_size = max(self.shuffle_blocks, 1)
        while True:
            fresh = state == ShareState(state.epoch)
            packed = self.packed(share, state.epoch, state.start)
            served_any = False
            while window := list(islice(packed, window_size)):
                served_any = True
                order = self.window_order(share, state, len(window))
                end = ShareState(state.epoch, state.window + 1, window[-1][1])
                for k in range(state.served, len(window)):
                    after = ShareState(state.epoch, state.window, state.start, k + 1) if k + 1 < len(window) else end
                    yield window[order[k]][0], after
                state = end
            if fresh and not served_any:
                raise DataError(self._empty_share_message(share))
            logger.debug("share %d of %d finished pass %d", share.index, share.count, state.epoch)
            state = ShareState(state.epoch + 1)

    def window_order(self, share: Share, state: ShareState, size: int) -> list[int]:
        """The order a window's blocks are served in: drawn from (seed, pass, share, window); as read without
        shuffling."""
        if self.shuffle_blocks <= 1:
            return list(range(size))
        rng = np.random.default_rng([self.seed, state.epoch, share.index, state.window])
        return rng.permutation(size).tolist()

    def packed(self, share: Share, epoch: int, start: Position) -> Iterator[tuple[np.ndarray, Position]]:
        """Blocks of block_size + 1 ids of the share's pass from `start`, one every block_size ids, each with
        where the next block starts."""
        buffer, head = np.zeros(0, np.int64), 0
        marks: list[tuple[int, Position]] = []  # where in the buffer each segment starts, and its position
        for ids, position in self.segments(share, epoch, start):
            buffer = np.concatenate([buffer[head:], ids])
            marks = [*_shifted(marks, head), (len(buffer) - len(ids), position)]
            head = 0
            while len(buffer) - head > self.block_size:
                head += self.block_size
                yield buffer[head - self.block_size : head + 1].copy(), _position_at(marks, head)

    def segments(self, share: Share, epoch: int, start: Position) -> Iterator[tuple[np.ndarray, Position]]:
        """The share's pieces' ids from `start` on, encoded a batch of pieces at a time, each with its position
        (the first piece without its first `start.token` ids)."""
        files, by_documents = self.plan(share, epoch)
        encode, eos = batch_encoder(self.tokenizer), self.tokenizer.eos_token_id
        documents = start.documents
        for index in range(start.file, len(files)):
            path, first = files[index]
            begin = max(first, start.piece) if index == start.file else first
            if by_documents and one_document(path, self.read_options) and documents % share.count != share.index:
                documents += 1  # someone else's one-document file: not read at all
                continue
            group: list[tuple[str, bool, Position]] = []
            size = 0
            for number, text, ends in numbered_pieces(path, self.read_options, encode, begin):
                if not by_documents or documents % share.count == share.index:
                    group.append((text, ends, Position(index, number, 0, documents)))
                    size += len(text)
                documents += ends
                if size >= BATCH_CHARS or len(group) >= BATCH_TEXTS:
                    yield from _encoded(encode, group, eos, start)
                    group, size = [], 0
            yield from _encoded(encode, group, eos, start)

    def plan(self, share: Share, epoch: int) -> tuple[list[Source], bool]:
        """The files a share reads in a pass, in order, and whether it keeps every n-th document of them (fewer
        files than shares) rather than every n-th file."""
        order = list(range(len(self.sources)))
        if self.shuffle_blocks > 1:
            order = np.random.default_rng([self.seed, epoch]).permutation(len(self.sources)).tolist()
        if len(self.sources) >= share.count:
            return [self.sources[i] for i in order[share.index :: share.count]], False
        return [self.sources[i] for i in order], True

    def _empty_share_message(self, share: Share) -> str:
        """Why a share has no block: too little text for this many ranks and workers."""
        return (
            f"share {share.index} of {share.count} of the training stream (rank {share.index // self.workers}, "
            f"worker {share.index % self.workers}) gets fewer than block_size + 1 = {self.block_size + 1} tokens "
            f"from a whole pass over {len(self.sources)} file(s): add text, or use fewer devices or "
            "--data.num_workers, or lower --data.block_size"
        )


def _encoded(
    encode: Any, group: list[tuple[str, bool, Position]], eos: int, start: Position
) -> Iterator[tuple[np.ndarray, Position]]:
    """Each piece's ids (eos appended when it ends its document) with its position; the piece `start` names
    loses its first `start.token` ids."""
    if not group:
        return
    for ids, (_, ends, position) in zip(encode([text for text, _, _ in group]), group, strict=True):
        array = np.asarray([*ids, eos] if ends else ids, np.int64)
        if (position.file, position.piece) == (start.file, start.piece) and start.token:
            array, position = array[start.token :], replace(position, token=start.token)
        if len(array):
            yield array, position


def _shifted(marks: list[tuple[int, Position]], head: int) -> list[tuple[int, Position]]:
    """Marks moved `head` ids left, from the segment holding the new offset 0 on (earlier ones are consumed)."""
    moved = [(offset - head, position) for offset, position in marks]
    first = max((i for i, (offset, _) in enumerate(moved) if offset <= 0), default=0)
    return moved[first:]


def _position_at(marks: list[tuple[int, Position]], offset: int) -> Position:
    """The position of the id at `offset` of the buffer, from the segment it falls in."""
    i = bisect.bisect_right([m for m, _ in marks], offset) - 1
    start, position = marks[i]
    return Position(position.file, position.piece, position.token + offset - start, position.documents)
