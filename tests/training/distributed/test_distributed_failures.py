"""A failing rank ends the whole two-process job: dead ranks either way round, and a stalled rank."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import lightning as L
import pytest
import torch

from tests.training.rank_faults import ddp_fit, lm_config, still_running, with_fault
from tetraformer.training.distributed.failures import (
    STARTUP_TIMEOUT_S,
    CollectiveTimeout,
    apply_collective_timeout,
    spawns_ranks,
)

# Without the watch on the other rank, a dead rank's partner would wait out this collective timeout: the dead-rank
# tests set it far above ddp_fit's hang guard, so only the watch can end the job in time.
UNWATCHED_TIMEOUT_S = 900
# The stalled-rank test's collective timeout, which the test waits out in full. It only has to outlast the longest
# wait of one rank for the other between setup (where it takes effect) and the stall at step 3: the post-setup
# barrier, DDP's parameter broadcast, the sanity validation, the matmul-peak and attention-kernel timings of a cold
# cache and three tiny steps, each a fraction of a second of CPU (measured: at most 0.7 s between two collectives
# with an empty cache beside four busy loops on 2 cores, 0.35 s idle). Nothing waits on a disk before the stall: the
# first checkpoint is written at the validation of step 5. What is slow on a busy machine (interpreter start,
# imports, the rendezvous, rank 0's data preparation) comes before setup and gets STARTUP_TIMEOUT_S instead. 10 s
# leaves a margin of about fourteen times the longest measured wait.
STALL_TIMEOUT_S = 10


def seconds_since_failure(tmp_path: Path) -> float:
    """Seconds from the failure RankFault caused to now."""
    return time.time() - float((tmp_path / "pids" / "failed_at").read_text())


@pytest.mark.distributed
def test_a_dead_rank_ends_the_job(tmp_path: Path) -> None:
    """Rank 1 exiting mid-training: both processes end, non-zero, long before the collective timeout would end the
    survivor (Lightning's launcher ends rank 0).

    The other way round, rank 0 (the launcher) gone, is the stalled-rank test's end: rank 1 notices that it was
    re-parented and ends itself, saying so. A SIGKILLed rank 0 re-parents it the same way, with no clean-up of its
    own, so that test proves the same watch."""
    config = with_fault(lm_config(tmp_path), tmp_path, step=3, rank=1, fault="exit")
    done, _ = ddp_fit(tmp_path, config, "--run.collective_timeout_s", str(UNWATCHED_TIMEOUT_S))
    assert done.returncode != 0 and seconds_since_failure(tmp_path) < UNWATCHED_TIMEOUT_S / 3, done.stderr[-2000:]
    assert not still_running(tmp_path / "pids")


@pytest.mark.distributed
def test_a_stalled_rank_ends_the_job_after_the_collective_timeout(tmp_path: Path) -> None:
    """Rank 1 hangs: rank 0 gives up after --run.collective_timeout_s, and rank 1 then ends because rank 0 is gone."""
    config = with_fault(lm_config(tmp_path), tmp_path, step=3, rank=1, fault="hang")
    done, _ = ddp_fit(tmp_path, config, "--run.collective_timeout_s", str(STALL_TIMEOUT_S))
    assert done.returncode != 0 and f"Timed out waiting {STALL_TIMEOUT_S * 1000}ms" in done.stderr, done.stderr[-2000:]
    assert "local rank 1: rank 0" in done.stderr and "is gone; ending this rank too" in done.stderr
    assert not still_running(tmp_path / "pids")


@pytest.mark.parametrize("strategy", ["ddp", "auto", "ddp_find_unused_parameters_true"])
def test_collective_timeout_reaches_the_resolved_strategy(strategy: str) -> None:
    """`ddp` given as a string (or picked by `auto` on two devices) forms its group with at least the startup
    timeout, to be lowered to the collective timeout after setup."""
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy=strategy, logger=False)
    assert apply_collective_timeout(trainer.strategy, 42) and spawns_ranks(trainer)
    assert trainer.strategy._timeout == timedelta(seconds=STARTUP_TIMEOUT_S)
    longer = L.Trainer(accelerator="cpu", devices=2, strategy=strategy, logger=False)
    assert apply_collective_timeout(longer.strategy, 2 * STARTUP_TIMEOUT_S)
    assert longer.strategy._timeout == timedelta(seconds=2 * STARTUP_TIMEOUT_S)


def test_a_timeout_the_strategy_config_sets_is_kept() -> None:
    """A strategy configured with its own timeout keeps it; a single-device run has none to set."""
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy=L.pytorch.strategies.DDPStrategy(timeout=timedelta(7)))
    assert not apply_collective_timeout(trainer.strategy, 42)
    assert trainer.strategy._timeout == timedelta(7)
    single = L.Trainer(accelerator="cpu", devices=1, logger=False)
    assert not apply_collective_timeout(single.strategy, 42)
    assert not hasattr(single.strategy, "_timeout") and not spawns_ranks(single)


def test_collectives_get_the_configured_timeout_after_setup() -> None:
    """The process group formed with the startup timeout waits the collective timeout once setup ran."""
    store = torch.distributed.HashStore()
    torch.distributed.init_process_group("gloo", rank=0, world_size=1, store=store, timeout=timedelta(seconds=600))
    try:
        backend = torch.distributed.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
        CollectiveTimeout(42).setup(L.Trainer(logger=False), L.LightningModule(), "fit")
        assert backend.options._timeout == timedelta(seconds=42)
    finally:
        torch.distributed.destroy_process_group()
