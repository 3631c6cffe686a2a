"""Exact resume of a streamed training set: every share's stream position rides in the checkpoint.

`StreamLoader` iterates a `TokenStream` (batches with their share's state after them). Lightning fetches a batch
ahead of the one it trains on when a loader has no length, so what was *served* is not what was *trained on*: each
batch carries its index (`STREAM_INDEX`), and the datamodule's `on_before_batch_transfer` hands it back through
`take_stream_index` when training takes the batch; `state_dict` is the state after the last batch taken. With
DataLoader workers, batch k comes from worker k % workers (workers take turns, and a stream never ends), so the
state holds each worker's share; a resumed pass rotates the workers so that the first batch comes from the share
whose turn it is. Under data parallelism each rank's states are gathered into the checkpoint (every rank saves;
rank zero writes) and each rank takes its own back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import torch.distributed as dist
from torch.utils.data import DataLoader

from tetraformer.data.token_stream_dataset import ShareState, TokenStream
from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.training.callbacks.token_budget import token_budget

log = logging.getLogger(__name__)
STREAM_INDEX = "stream_index"  # batch entry: the batch's number in the rank's stream, taken off before the model


class StreamLoader(DataLoader):
    """A DataLoader over a TokenStream whose `state_dict` is every rank's and worker's stream position."""

    def __init__(
        self,
        dataset: TokenStream,
        num_workers: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        **kwargs: Any,
    ) -> None:
        if num_replicas is None:  # the torch.distributed world when not told
            distributed = dist.is_available() and dist.is_initialized()
            num_replicas, rank = (dist.get_world_size(), dist.get_rank()) if distributed else (1, 0)
        super().__init__(dataset, batch_size=None, num_workers=num_workers, collate_fn=_unchanged, **kwargs)
        self.rank, self.world, self.shares = rank or 0, num_replicas, max(num_workers, 1)
        self.taken = 0  # batches training took
        self.states: dict[int, dict[str, int]] = {}  # by worker: its share's state after its last batch taken
        self._in_flight: dict[int, tuple[int, dict[str, int]]] = {}  # served, not yet taken: index -> worker, state
        self.first_pass = 0  # the pass a share without a state starts at

    def __iter__(self) -> Iterator[dict[str, Any]]:
        dataset: TokenStream = self.dataset  # type: ignore[assignment]
        start = self.taken
        states = {
            self.rank * self.shares + worker: ShareState.from_dict(self.states[worker])
            if worker in self.states
            else ShareState(self.first_pass)
            for worker in range(self.shares)
        }
        dataset.assign(self.rank, self.world, self.shares, start % self.shares, states)
        self._in_flight.clear()
        try:
            for offset, (batch, state) in enumerate(super().__iter__()):
                index = start + offset
                self._in_flight[index] = (index % self.shares, state)
                yield {**batch, STREAM_INDEX: index}
        except TetraformerError as err:
            raise from_worker(err) from None

    def take(self, index: int) -> None:
        """Training took batch `index`: the position is now after it."""
        for served in sorted(i for i in self._in_flight if i <= index):
            worker, state = self._in_flight.pop(served)
            self.states[worker] = state
        self.taken = index + 1

    def state_dict(self) -> dict[str, Any]:
        """Every rank's position: batches taken and each worker's share state (gathered over the ranks)."""
        mine = {"taken": self.taken, "workers": self.shares, "states": dict(self.states)}
        return {"ranks": _gather(mine, self.world)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue after the position the checkpoint's run had reached, when it ran as many ranks and workers."""
        ranks = state.get("ranks", [])
        if len(ranks) != self.world or ranks[self.rank]["workers"] != self.shares:
            passes = [int(s["epoch"]) for rank in ranks for s in rank["states"].values()]
            self.first_pass = max(passes, default=-1) + 1
            log.warning(
                "the checkpoint's stream positions are of %d rank(s) x %d worker(s), this run reads %d x %d: each "
                "share starts at the beginning of pass %d",
                len(ranks),
                ranks[0]["workers"] if ranks else 0,
                self.world,
                self.shares,
                self.first_pass,
            )
            return
        mine = ranks[self.rank]
        self.taken = int(mine["taken"])
        self.states = {int(worker): dict(s) for worker, s in mine["states"].items()}


def stream_loader(dataset: TokenStream, num_workers: int, trainer: Any) -> StreamLoader:
    """The training loader of a stream, read as this trainer's data-parallel rank."""
    shards = (trainer.distributed_sampler_kwargs if trainer is not None else None) or {}
    return StreamLoader(dataset, num_workers=num_workers, **shards)


def check_stream_trainer(trainer: Any) -> None:
    """A stream has no length: a ConfigError unless --trainer.max_steps or --run.max_tokens bounds the fit, and
    validation comes every N batches (a warning when it would never come)."""
    if trainer is None:
        return
    if trainer.max_steps < 0 and token_budget(trainer) is None:
        raise ConfigError(
            "--data.streaming true reads the training files as a stream of unknown length, whose epoch never "
            "ends: set --trainer.max_steps or --run.max_tokens"
        )
    interval = trainer.val_check_interval
    if isinstance(interval, float) and interval != 1.0:
        raise ConfigError(
            f"--trainer.val_check_interval {interval} is a share of an epoch, and a stream has no length: with "
            "--data.streaming true set a number of training batches (an int)"
        )
    if isinstance(interval, float) and trainer.limit_val_batches != 0:
        log.warning(
            "validation runs at the end of an epoch, which a stream never reaches: set --trainer.val_check_interval "
            "N to validate every N training batches"
        )


def take_stream_index(batch: Any, loader: Any) -> Any:
    """Take a training batch's STREAM_INDEX off and tell its StreamLoader; other batches pass unchanged."""
    if isinstance(batch, dict) and STREAM_INDEX in batch and isinstance(loader, StreamLoader):
        batch = dict(batch)
        loader.take(int(batch.pop(STREAM_INDEX)))
    return batch


def from_worker(err: TetraformerError) -> TetraformerError:
    """A TetraformerError with its one-line message again: torch re-raises a DataLoader worker's error with the
    worker's whole traceback as its message."""
    text = str(err)
    if not text.startswith("Caught "):
        return err
    last = text.rstrip().splitlines()[-1]
    message = last.removeprefix(f"{type(err).__module__}.{type(err).__name__}: ")
    try:
        return type(err)(message)
    except TypeError:  # an error class taking other arguments
        return TetraformerError(message)


def _unchanged(item: Any) -> Any:
    """The batch as the dataset made it."""
    return item


def _gather(value: Any, world: int) -> list[Any]:
    """`value` from every rank, in rank order."""
    if world == 1 or not (dist.is_available() and dist.is_initialized()):
        return [value]
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, value)
    return gathered
