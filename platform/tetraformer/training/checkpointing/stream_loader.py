"""Exact resume of a streamed training set: every share's stream position rides in the checkpoint.

`StreamLoader` iterates a `TokenStream` (batches with their share's state after them); as every training loader it is
a `PositionLoader` (training/checkpointing/resume.py), whose state is the position after the last batch training
took (a stream has no length, so Lightning fetches a batch ahead and the batch's number tells what was taken). With
DataLoader workers, batch k comes from worker k % workers (workers take turns, and a stream never ends), so the
state holds each worker's share; a resumed pass rotates the workers so that the first batch comes from the share
whose turn it is. Under data parallelism each rank's states are gathered into the checkpoint (every rank saves;
rank zero writes) and each rank takes its own back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader

from tetraformer.data.token_stream_dataset import ShareState, TokenStream
from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.training.callbacks.token_budget import token_budget
from tetraformer.training.checkpointing.resume import LoaderPosition, PositionLoader

log = logging.getLogger(__name__)


class StreamLoader(PositionLoader):
    """A PositionLoader over a TokenStream: its position is the batches taken and each worker's share state."""

    def __init__(
        self,
        dataset: TokenStream,
        num_workers: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.shares = max(num_workers, 1)
        start = {"taken": 0, "workers": self.shares, "states": {}}
        options = {"batch_size": None, "num_workers": num_workers, "collate_fn": _unchanged, **kwargs}
        super().__init__(dataset, start, num_replicas, rank, **options)
        self.first_pass = 0  # the pass a share without a state starts at

    def positioned(self, loaded: LoaderPosition | None) -> Iterator[tuple[Any, LoaderPosition]]:
        """The stream's batches from the loaded position (else where training is), each with the batches taken and
        every worker's share state after it; workers rotate so that the next batch comes from the share whose turn
        it is."""
        dataset: TokenStream = self.dataset  # type: ignore[assignment]
        start = self.position if loaded is None else loaded
        taken, states = int(start["taken"]), {int(worker): dict(s) for worker, s in start["states"].items()}
        shares = {
            self.rank * self.shares + worker: ShareState.from_dict(states[worker])
            if worker in states
            else ShareState(self.first_pass)
            for worker in range(self.shares)
        }
        dataset.assign(self.rank, self.world, self.shares, taken % self.shares, shares)
        try:
            for index, (batch, state) in enumerate(DataLoader.__iter__(self), taken):
                states = {**states, index % self.shares: state}
                yield batch, {"taken": index + 1, "workers": self.shares, "states": states}
        except TetraformerError as err:
            failure = from_worker(err)
            if failure is not err:
                # torch re-raises a worker's error from a frame that holds it: a cycle through the loader's
                # iterator that only the garbage collector ended, whose shutdown of the workers (their queues
                # collected first) then waited 5 s for each; without its frames the iterator stops them at once
                err.__traceback__ = None
            raise failure from None

    def resume_at(self, ranks: list[LoaderPosition]) -> LoaderPosition | None:
        """This rank's position, when the checkpoint's run had as many ranks and workers; else None, and each share
        starts the pass after the furthest one the checkpoint reached (logged)."""
        if len(ranks) == self.world and ranks[self.rank]["workers"] == self.shares:
            return ranks[self.rank]
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
        return None


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
