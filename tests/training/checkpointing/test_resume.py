"""Exact resume: a run stopped at any step and resumed ends with the weights of the run that never stopped."""

from __future__ import annotations

import random
import shutil
import warnings
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.training.resume_runs import STEPS, checkpoint, fit, same_weights, write_config
from tetraformer.accel.chooser import LayoutChooser
from tetraformer.data.buckets import LengthBuckets
from tetraformer.training.callbacks import peak
from tetraformer.training.checkpointing.resume import (
    EpochBatches,
    RandomState,
    ResumableLoader,
    resume_path,
    rng_state,
    set_rng_state,
)


def epoch_batches(loader: ResumableLoader, epoch: int) -> list[list[int]]:
    """The batches (as index lists) of one pass over an epoch."""
    loader.sampler.set_epoch(epoch)
    return [batch.tolist() for batch in loader]


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_state_resumes_at_the_next_batch(workers: int) -> None:
    """A new loader given the state after k batches of an epoch serves exactly that epoch's remaining batches."""
    data = list(range(30))
    whole = epoch_batches(ResumableLoader(data, batch_size=4, shuffle=True, seed=5), epoch=3)
    loader = ResumableLoader(data, batch_size=4, shuffle=True, seed=5, num_workers=workers)
    loader.sampler.set_epoch(3)
    batches = iter(loader)
    first = [next(batches).tolist() for _ in range(3)]
    state = loader.state_dict()
    assert state == {
        "ranks": [{"epoch": 3, "batches": 3}]
    }  # counted as served to training, not as prefetched by workers
    resumed = ResumableLoader(data, batch_size=4, shuffle=True, seed=5, num_workers=workers)
    resumed.load_state_dict(state)
    assert first + epoch_batches(resumed, epoch=3) == whole
    assert epoch_batches(resumed, epoch=3) == whole  # only the next pass starts part-way
    older = ResumableLoader(data, batch_size=4, shuffle=True, seed=5)
    older.load_state_dict({"epoch": 3, "batches": 3})  # one rank's position, as checkpoints before ranks held it
    assert epoch_batches(older, epoch=3) == whole[3:]


def test_each_epoch_has_its_own_order_drawn_again_the_same() -> None:
    """Epochs differ in order; drawing an epoch again (another loader, same seed) gives the same batches."""
    loader = ResumableLoader(list(range(40)), batch_size=8, shuffle=True, seed=1)
    again = ResumableLoader(list(range(40)), batch_size=8, shuffle=True, seed=1)
    assert epoch_batches(loader, 0) != epoch_batches(loader, 1)
    assert epoch_batches(loader, 1) == epoch_batches(again, 1)
    assert sorted(i for b in epoch_batches(loader, 2) for i in b) == list(range(40))


def test_ranks_share_out_each_epochs_batches() -> None:
    """Two ranks get disjoint batches that together are the epoch's, each resumable on its own."""
    order = LengthBuckets(list(range(50)), batch_size=5, seed=0)
    shares = [EpochBatches(order, num_replicas=2, rank=rank) for rank in (0, 1)]
    for share in shares:
        share.set_epoch(4)
    rank0, rank1 = (list(share) for share in shares)
    assert len(rank0) == len(rank1) == 5
    assert sorted(rank0 + rank1) == sorted(order)
    shares[1].start = 2
    assert list(shares[1]) == rank1[2:]


def test_batch_samplers_see_the_epoch() -> None:
    """A task's batch sampler (length buckets) gets each epoch's number, so epochs are not all alike."""
    lengths = [i % 7 for i in range(64)]
    loader = ResumableLoader(list(range(64)), batch_sampler=LengthBuckets(lengths, 8, seed=2))
    first, second = epoch_batches(loader, 0), epoch_batches(loader, 1)
    assert first != second and sorted(map(sorted, first)) != sorted(map(sorted, second))


def test_rng_states_survive_a_checkpoint() -> None:
    """Python, NumPy and torch draws repeat after restoring states that went through torch.save/load."""
    state = rng_state()
    draws = (random.random(), np.random.rand(), torch.rand(3))
    buffer = BytesIO()
    torch.save({"rng": state}, buffer)
    buffer.seek(0)
    set_rng_state(torch.load(buffer, weights_only=True)["rng"])
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert draws[:2] == again[:2] and torch.equal(draws[2], again[2])


def test_last_before_any_checkpoint_means_from_scratch(tmp_path: Path) -> None:
    """`--ckpt_path last` with no last.ckpt resumes nothing; once it exists it is used; other paths are kept."""
    assert resume_path("last", tmp_path) is None
    (tmp_path / "last.ckpt").write_bytes(b"")
    assert resume_path("last", tmp_path) == "last"
    assert resume_path("/x/best.ckpt", tmp_path) == "/x/best.ckpt"


# --- through the CLI ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    """Runs of the uninterrupted run's config stopped by `--trainer.max_steps K`, by K (made on first use)."""
    runs: dict[int, Path] = {}

    def make(step: int) -> Path:
        if step not in runs:
            root = tmp_path_factory.mktemp(f"stopped{step}")
            fit(write_config(root, root / "run"), "--trainer.max_steps", str(step))
            runs[step] = root / "run"
        return runs[step]

    return make


def resume_copy(run: Path, tmp_path: Path) -> Path:
    """Copy a stopped run and resume the copy to the end with `fit --ckpt_path last`; the copy's run dir."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(write_config(tmp_path, copy), "--ckpt_path", "last")
    assert not [w for w in caught if "not resumable" in str(w.message)]
    assert checkpoint(copy)["global_step"] == STEPS
    return copy


@pytest.mark.parametrize(
    "step", [7, 10, 12], ids=["mid-epoch", "at-a-validation", "at-an-epoch-end"]
)  # 6 batches an epoch, validations every 5 steps
def test_resumed_run_ends_with_the_uninterrupted_weights(
    step: int, stopped: Callable[[int], Path], uninterrupted: Path, tmp_path: Path
) -> None:
    """Stopped at step K (mid-epoch; after a validation wrote last.ckpt; at the end of an epoch) and resumed:
    every tensor of the final weights equals the uninterrupted run's."""
    assert checkpoint(stopped(step))["global_step"] == step
    assert same_weights(resume_copy(stopped(step), tmp_path), uninterrupted)


def test_resume_that_drops_the_data_position_differs(
    stopped: Callable[[int], Path], uninterrupted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: the loader ignoring its saved position (the epoch restarts) ends with other weights."""
    monkeypatch.setattr(ResumableLoader, "load_state_dict", lambda self, state: None)
    assert not same_weights(resume_copy(stopped(7), tmp_path), uninterrupted)


def test_resume_that_drops_the_rng_states_differs(
    stopped: Callable[[int], Path], uninterrupted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: without the saved RNG states, dropout draws other masks and the weights differ."""
    monkeypatch.setattr(RandomState, "on_train_start", lambda self, trainer, module: None)
    assert not same_weights(resume_copy(stopped(7), tmp_path), uninterrupted)


def test_checkpoint_holds_the_data_position_and_rng_states(stopped: Callable[[int], Path]) -> None:
    """last.ckpt carries the loader's (epoch, batches served) and one RNG state per rank."""
    ckpt = checkpoint(stopped(7))
    assert ckpt["loops"]["fit_loop"]["state_dict"]["combined_loader"] == [{"ranks": [{"epoch": 1, "batches": 1}]}]
    (state,) = ckpt["rng_states"]
    assert set(state) == {"python", "numpy", "torch", "cuda"}


def test_resume_last_before_any_checkpoint_trains_from_scratch(
    uninterrupted: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`fit --ckpt_path last` in a fresh run dir (a requeued job's first start) trains from scratch, quietly."""
    caplog.set_level("INFO")
    run = tmp_path / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(write_config(tmp_path, run), "--ckpt_path", "last")
    assert not [w for w in caught if "no last checkpoint" in str(w.message)]
    assert "training from scratch" in caplog.text
    assert same_weights(run, uninterrupted)


@pytest.mark.slow
def test_resume_is_exact_when_callbacks_draw_random_numbers_at_train_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--run.peak_tflops auto` times a matmul of random inputs at train start (the first fit on a machine: each
    fit here starts with an empty peaks file and a cold process cache); the RNG states are restored after such
    draws."""
    auto = ("--run.peak_tflops", "auto")
    peaks = tmp_path / "matmul_peaks.json"
    runs = {name: tmp_path / name for name in ("reference", "resumed")}
    configs = {name: write_config(tmp_path, run, log_every_n_steps=5) for name, run in runs.items()}
    for name, args in [
        ("reference", ()),
        ("resumed", ("--trainer.max_steps", "7")),
        ("resumed", ("--ckpt_path", "last")),
    ]:
        peaks.unlink(missing_ok=True)
        monkeypatch.setattr(peak, "PEAKS", LayoutChooser(machine=lambda: "this machine", path=peaks))
        fit(configs[name], *auto, *args)
        assert peaks.is_file()  # this fit timed the peak
    assert same_weights(runs["resumed"], runs["reference"])
