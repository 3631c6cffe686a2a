"""Exact resume: the training data order and every RNG state a checkpoint carries, restored on `fit --ckpt_path`.

A run stopped at any step and resumed ends with the weights of the run that never stopped (on CPU). One mechanism
carries the data position: every training loader is a `PositionLoader`, whose state (Lightning keeps it in the
checkpoint's loop state) is every rank's position after the last batch training took; `DataPosition` loads it where
Lightning 2.6 drops it. A position is what the dataset's kind needs:
- `ResumableLoader` (map-style rows and blocks): the epoch's batches are drawn again from (seed, epoch) and sharded
  per rank (`EpochBatches`, a DistributedSampler over batches); its position is (epoch, batches served), and a
  resumed run starts at the next batch, skipping indices, not loading data.
- `StreamLoader` (training/checkpointing/stream_loader.py, a streamed corpus): the batches taken and each worker's
  share state.
- `RandomState`: every rank's Python, NumPy, torch CPU and CUDA RNG states, restored when training starts.

Not torchdata's `StatefulDataLoader` (0.11.0, measured under Lightning 2.6.6 with a checkpoint after every step, a run
stopped after step 3 or 9 and resumed against the run that never stopped, batch size 2): exact for a shuffled
map-style loader bounded by steps, but not for one bounded by epochs (an LR schedule reads
`estimated_stepping_batches`, #20550: the resumed epoch 2 began again with epoch 0's order) nor for a stream without
a length (Lightning fetches one batch ahead, so the saved position is past a batch never trained on: id 6 of 0..11
was skipped). Its state path is the one these loaders use, so it would still need `DataPosition` and the stream's
taken-batch index; the epoch order by (seed, epoch) and the per-rank sharding are what `ResumableLoader` adds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Callback
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler, Sampler, SequentialSampler
from torch.utils.data.dataloader import default_collate

from tetraformer.training.rng import rng_state, set_rng_state

log = logging.getLogger(__name__)
RNG_KEY = "rng_states"  # checkpoint entry: one dict of RNG states per rank


# --- data order ------------------------------------------------------------------------------------
def data_parallel(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """(world size, rank) as given, else torch.distributed's when it runs (a strategy's data-parallel one), else one."""
    if num_replicas is not None:
        return num_replicas, rank or 0
    distributed = dist.is_available() and dist.is_initialized()
    return (dist.get_world_size(), dist.get_rank()) if distributed else (1, 0)


class EpochShuffle(Sampler[int]):
    """0..n-1 in an order drawn from seed + epoch: the same order each time that epoch is drawn."""

    def __init__(self, n: int, seed: int = 0) -> None:
        super().__init__()
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """Use the order of this epoch."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        yield from torch.randperm(self.n, generator=generator).tolist()


class EpochBatches(DistributedSampler):
    """This rank's share of an epoch's batches (every world_size-th, padded like DistributedSampler), from `start`.

    `batches` is any batch sampler whose order depends only on its epoch (set_epoch reaches it, or its `sampler`).
    Being a DistributedSampler, Lightning neither replaces it under DDP nor misses it when it sets the epoch.
    """

    def __init__(self, batches: Sampler[list[int]], num_replicas: int | None = None, rank: int | None = None) -> None:
        num_replicas, rank = data_parallel(num_replicas, rank)
        super().__init__(batches, num_replicas, rank, shuffle=False)  # type: ignore[arg-type]
        self.batches, self.start = batches, 0

    def set_epoch(self, epoch: int) -> None:
        """Use the batches of this epoch (the batch sampler's, or its sampler's, order)."""
        super().set_epoch(epoch)
        for order in (self.batches, getattr(self.batches, "sampler", None)):
            if callable(getattr(order, "set_epoch", None)):
                order.set_epoch(epoch)

    def __iter__(self) -> Iterator[list[int]]:
        batches = list(self.batches)
        start, self.start = self.start, 0
        for position in list(super().__iter__())[start:]:
            yield batches[position]


class Rows(Dataset):
    """A dataset read a batch of indices at a time (its `__getitems__` when it has one), as DataLoader does."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, indices: list[int]) -> Any:
        getitems = getattr(self.dataset, "__getitems__", None)
        return getitems(indices) if getitems else [self.dataset[i] for i in indices]


BATCH_INDEX = "batch_index"  # batch entry: its number in the loader, taken off before the model (take_batch_index)
LoaderPosition = dict[str, Any]  # where training is in a loader's data, after a batch: plain ints, dicts and lists


class PositionLoader(DataLoader):
    """A training DataLoader whose `state_dict` is where training is in its data, on every rank: the position after
    the last batch training took, from which `load_state_dict` starts the next pass.

    A subclass gives its batches with the position after each (`positioned`) and where a checkpoint's positions put
    it (`resume_at`). Lightning fetches a batch ahead from a loader without a length, so what was served is not yet
    what was trained on: such a loader's batches carry their number (`BATCH_INDEX`), which `take_batch_index` hands
    back when training takes the batch; a loader with a length is not fetched ahead, so each batch served is taken.
    """

    def __init__(
        self,
        dataset: Any,
        position: LoaderPosition,
        num_replicas: int | None = None,
        rank: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dataset, **kwargs)
        self.world, self.rank = data_parallel(num_replicas, rank)
        self.position = position  # after the last batch taken (or where training starts)
        self._loaded: list[LoaderPosition] | None = None  # every rank's positions from a checkpoint, for the next pass
        self._in_flight: dict[int, LoaderPosition] = {}  # batches served but not yet taken: number -> position after it
        self._served = 0

    def positioned(self, loaded: LoaderPosition | None) -> Iterator[tuple[Any, LoaderPosition]]:
        """The pass's batches, each with the position after it, from `loaded` when a checkpoint gave one."""
        raise NotImplementedError

    def resume_at(self, ranks: list[LoaderPosition]) -> LoaderPosition | None:
        """This rank's position among a checkpoint's, or None (logged) where they do not fit this run."""
        if len(ranks) == self.world:
            return ranks[self.rank]
        log.warning(
            "the checkpoint's data positions are of %d rank(s), this run has %d: it starts again",
            len(ranks),
            self.world,
        )
        return None

    def state_dict(self) -> dict[str, Any]:
        """Every rank's position after the last batch training took (gathered over the ranks)."""
        return {"ranks": all_ranks(self.position, self.world)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Start the next pass where a checkpoint's run was (a state of one rank's position, as older checkpoints
        hold, counts for every rank)."""
        self._loaded = state["ranks"] if "ranks" in state else [state] * self.world

    def __iter__(self) -> Iterator[Any]:
        loaded, self._loaded = self._loaded, None
        tagged = not _sized(self)
        self._in_flight.clear()
        for batch, position in self.positioned(None if loaded is None else self.resume_at(loaded)):
            if not tagged:
                self.position = position
                yield batch
                continue
            index, self._served = self._served, self._served + 1
            self._in_flight[index] = position
            yield {**batch, BATCH_INDEX: index}

    def take(self, index: int) -> None:
        """Training took batch `index`: the position is now after it."""
        for served in sorted(i for i in self._in_flight if i <= index):
            self.position = self._in_flight.pop(served)


def _sized(loader: DataLoader) -> bool:
    """Whether a loader has a length (Lightning then fetches no batch ahead)."""
    try:
        len(loader)
    except (TypeError, NotImplementedError):
        return False
    return True


def take_batch_index(batch: Any, loader: Any) -> Any:
    """Take a training batch's BATCH_INDEX off and tell its loader; other batches pass unchanged."""
    if isinstance(batch, dict) and BATCH_INDEX in batch and isinstance(loader, PositionLoader):
        batch = dict(batch)
        loader.take(int(batch.pop(BATCH_INDEX)))
    return batch


class ResumableLoader(PositionLoader):
    """A training PositionLoader over map-style rows that Lightning checkpoints mid-epoch: its position is (epoch,
    batches served).

    Takes DataLoader's arguments plus `seed` (`shuffle` draws each epoch's order from seed + epoch) and the
    data-parallel `num_replicas` and `rank` (default: torch.distributed's). After `load_state_dict`, the pass over
    that epoch starts at the next batch. Batches come from `EpochBatches` as lists of indices; worker seeds come
    from (seed, epoch, rank), never from the global RNG.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = False,
        sampler: Sampler[int] | None = None,
        batch_sampler: Sampler[list[int]] | None = None,
        drop_last: bool = False,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        **kwargs: Any,
    ) -> None:
        if batch_sampler is None:
            if sampler is None:
                sampler = EpochShuffle(len(dataset), seed) if shuffle else SequentialSampler(range(len(dataset)))
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        kwargs["collate_fn"] = kwargs.get("collate_fn") or default_collate
        generator = kwargs.pop("generator", None) or torch.Generator()
        order = EpochBatches(batch_sampler, num_replicas, rank)
        start = {"epoch": 0, "batches": 0}
        options = {"batch_size": None, "sampler": order, "generator": generator, **kwargs}
        super().__init__(Rows(dataset), start, order.num_replicas, order.rank, **options)
        self.seed = seed

    def positioned(self, loaded: LoaderPosition | None) -> Iterator[tuple[Any, LoaderPosition]]:
        """The epoch's batches from the loaded position's next one (when it is that epoch's), with (epoch, batches
        served) after each; worker seeds from (seed, epoch, rank)."""
        order: EpochBatches = self.sampler  # type: ignore[assignment]
        epoch = order.epoch
        order.start = self._start(epoch, loaded)
        self.generator.manual_seed(hash((self.seed, epoch, order.rank)))  # workers' seeds (int hashes are fixed)
        for served, batch in enumerate(DataLoader.__iter__(self), order.start + 1):
            yield batch, {"epoch": epoch, "batches": served}

    def _start(self, epoch: int, state: LoaderPosition | None) -> int:
        """The batch a pass over `epoch` starts at: after the loaded position's, when it is that epoch's."""
        if state is None:
            return 0
        if state["epoch"] == epoch:
            return state["batches"]
        if state["epoch"] != epoch - 1 or state["batches"] < len(self):
            log.warning(
                "the checkpoint's data position (epoch %d, batch %d) is not in epoch %d: it starts at its first batch",
                state["epoch"],
                state["batches"],
                epoch,
            )
        return 0


class DataPosition(Callback):
    """Hands the checkpoint's training-loader state (a PositionLoader's positions) to the loader when
    Lightning left it unloaded, and starts the pass again from it.

    Home-made because Lightning 2.6 drops it (Lightning-AI/pytorch-lightning#20550): it loads the states only when it
    builds the training loader after restoring the checkpoint, but `trainer.estimated_stepping_batches`, which sizes
    the learning-rate schedule in `configure_optimizers`, builds it before the restore whenever the run is bounded by
    epochs; the resumed run then started its epoch again at the first batch and trained on other batches. Runs
    before RandomState, which restores the RNG over whatever a new pass draws.
    """

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Load the states Lightning kept back and renew the data fetcher's iterator (built before they were loaded)."""
        loop = trainer.fit_loop
        if not (loop.restarting and loop._combined_loader_states_to_load and loop._combined_loader is not None):
            return  # nothing kept back: Lightning loaded the states itself (or there were none)
        loop._load_combined_loader_states()
        if loop._data_fetcher is not None:
            iter(loop._data_fetcher)


def all_ranks(value: Any, world: int) -> list[Any]:
    """`value` from every one of `world` ranks, in rank order (on every rank)."""
    if world == 1 or not (dist.is_available() and dist.is_initialized()):
        return [value]
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, value)
    return gathered


class RandomState(Callback):
    """Saves every rank's RNG states in checkpoints (`rng_states`) and restores its own when training resumes.

    Restored at train start, after setup and before the first batch is drawn, so dropout, masking and
    augmentation draw what the run that never stopped drew; it comes last among the callbacks, so random draws
    other callbacks make at train start (a matmul peak probe) are drawn over too.
    """

    def __init__(self) -> None:
        self._loaded: list[dict[str, Any]] | None = None

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        """Gather the states of all ranks (every rank saves; rank zero writes)."""
        checkpoint[RNG_KEY] = all_ranks(rng_state(), trainer.world_size)

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        """Keep the states until training starts."""
        self._loaded = checkpoint.get(RNG_KEY)

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Restore this rank's states, when the checkpoint has them."""
        states, self._loaded = self._loaded, None
        if states is None:
            return
        if len(states) != trainer.world_size:
            log.warning(
                "the checkpoint holds RNG states of %d ranks, this run has %d: random draws will differ "
                "from the run that never stopped",
                len(states),
                trainer.world_size,
            )
            return
        set_rng_state(states[trainer.global_rank])


def resume_path(ckpt_path: str | None, checkpoint_dir: Path) -> str | None:
    """`fit --ckpt_path last` with no last.ckpt yet starts from scratch (a requeued job's first run); else as given."""
    if ckpt_path != "last" or (checkpoint_dir / "last.ckpt").is_file():
        return ckpt_path
    log.info("no %s yet: training from scratch", checkpoint_dir / "last.ckpt")
    return None
