"""Exact resume: the training data order and every RNG state a checkpoint carries, restored on `fit --ckpt_path`.

A run stopped at any step and resumed ends with the weights of the run that never stopped (on CPU):
- `ResumableLoader`: the epoch's batches are drawn again from (seed, epoch) and sharded per rank
  (`EpochBatches`, a DistributedSampler over batches); its `state_dict` (epoch, batches served) rides in
  Lightning's checkpoint and a resumed run starts at the next batch, skipping indices, not loading data.
- `DataPosition`: hands the checkpoint's loader state to the training loader when Lightning would drop it.
- `RandomState`: every rank's Python, NumPy, torch CPU and CUDA RNG states, restored when training starts.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Callback
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler, Sampler, SequentialSampler
from torch.utils.data.dataloader import default_collate

log = logging.getLogger(__name__)
RNG_KEY = "rng_states"  # checkpoint entry: one dict of RNG states per rank


# --- data order ------------------------------------------------------------------------------------
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
        if num_replicas is None:  # the torch.distributed world when not told (a strategy's data-parallel one)
            distributed = dist.is_available() and dist.is_initialized()
            num_replicas, rank = (dist.get_world_size(), dist.get_rank()) if distributed else (1, 0)
        super().__init__(batches, num_replicas, rank or 0, shuffle=False)  # type: ignore[arg-type]
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


class ResumableLoader(DataLoader):
    """A training DataLoader Lightning checkpoints mid-epoch: `state_dict()` is (epoch, batches served).

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
        super().__init__(Rows(dataset), batch_size=None, sampler=order, generator=generator, **kwargs)
        self.seed, self.epoch, self.served = seed, 0, 0
        self._resume: dict[str, int] | None = None

    def state_dict(self) -> dict[str, int]:
        """Where training is in the data: the epoch and how many of its batches this pass served."""
        return {"epoch": self.epoch, "batches": self.served}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Start the next pass after the batches a checkpoint's run had served, when it is the same epoch."""
        self._resume = dict(state)

    def __iter__(self) -> Iterator[Any]:
        order: EpochBatches = self.sampler  # type: ignore[assignment]
        self.epoch, self.served = order.epoch, self._start(order.epoch)
        order.start = self.served
        self.generator.manual_seed(hash((self.seed, self.epoch, order.rank)))  # workers' seeds (int hashes are fixed)
        for batch in super().__iter__():
            self.served += 1
            yield batch

    def _start(self, epoch: int) -> int:
        """The batch a pass over `epoch` starts at: after the loaded state's, when it is that epoch's."""
        state, self._resume = self._resume, None
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
    """Hands the checkpoint's training-loader state (ResumableLoader's epoch and batches served) to the loader when
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


# --- RNG states ------------------------------------------------------------------------------------
def rng_state() -> dict[str, Any]:
    """This process's Python, NumPy, torch CPU and (when initialised) CUDA RNG states, as plain data and tensors."""
    _, key, pos, has_gauss, gauss = np.random.get_state()
    numpy = {
        "key": torch.from_numpy(key.astype(np.int64)),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "gauss": float(gauss),
    }
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    return {"python": random.getstate(), "numpy": numpy, "torch": torch.get_rng_state(), "cuda": cuda}


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states `rng_state` took (CUDA's when this process sees as many devices)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy = state["numpy"]
    key = numpy["key"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", key, numpy["pos"], numpy["has_gauss"], numpy["gauss"]))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def all_ranks(trainer: L.Trainer, value: Any) -> list[Any]:
    """`value` from every rank, in rank order (on every rank)."""
    if trainer.world_size == 1 or not (dist.is_available() and dist.is_initialized()):
        return [value]
    gathered: list[Any] = [None] * trainer.world_size
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
        checkpoint[RNG_KEY] = all_ranks(trainer, rng_state())

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
