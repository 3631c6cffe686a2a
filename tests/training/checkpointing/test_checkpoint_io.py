"""Atomic checkpoints: a write killed midway leaves the previous checkpoint loadable and nothing mistaken for one."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from pathlib import Path
from typing import IO

import pytest
import torch
from lightning.fabric.plugins import TorchCheckpointIO

from tests.training.resume_runs import checkpoint, fit, write_config
from tetraformer.training.checkpointing.atomic_io import AtomicCheckpointIO, atomic_save, with_atomic_io


def die_halfway(path: Path, whole: Path) -> None:
    """In a forked child: save a checkpoint to `path` whose write stops after half its bytes (os._exit(3))."""
    real_save = torch.save

    def half_then_die(obj: object, f: IO[bytes], *args: object, **kwargs: object) -> None:
        real_save(obj, whole)
        data = whole.read_bytes()
        f.write(data[: len(data) // 2])
        f.flush()
        os._exit(3)

    torch.save = half_then_die
    AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.ones(1000)}}, path)


def test_atomic_save_replaces_the_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    """The new checkpoint takes the old one's place; the directory holds only it."""
    path = tmp_path / "last.ckpt"
    atomic_save({"step": 1}, path)
    atomic_save({"step": 2}, path)
    assert torch.load(path, weights_only=True) == {"step": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_write_killed_halfway_keeps_the_previous_checkpoint(uninterrupted: Path, tmp_path: Path) -> None:
    """A process dying halfway through writing last.ckpt (half the bytes, then os._exit) leaves the previous
    last.ckpt whole; `fit --ckpt_path last` resumes from it and the next save removes the unfinished file."""
    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)
    last = run / "checkpoints" / "last.ckpt"
    before = last.read_bytes()
    died = multiprocessing.get_context("fork").Process(target=die_halfway, args=(last, tmp_path / "whole.pt"))
    died.start()
    died.join(timeout=300)
    assert died.exitcode == 3
    assert last.read_bytes() == before
    (partial,) = (run / "checkpoints").glob(".partial-*.tmp")
    assert 0 < partial.stat().st_size < (tmp_path / "whole.pt").stat().st_size
    step = checkpoint(run)["global_step"]
    fit(write_config(tmp_path, run), "--ckpt_path", "last", "--trainer.max_steps", str(step + 1))
    assert checkpoint(run)["global_step"] == step + 1
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]


@pytest.mark.slow
def test_fit_writes_every_checkpoint_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """best.ckpt and last.ckpt of a fit both go through AtomicCheckpointIO."""
    written: list[str] = []
    save = AtomicCheckpointIO.save_checkpoint

    def spy(self: AtomicCheckpointIO, checkpoint: dict, path: Path, storage_options: object = None) -> None:
        written.append(Path(path).name)
        save(self, checkpoint, path, storage_options)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", spy)
    fit(write_config(tmp_path, tmp_path / "run"), "--trainer.max_steps", "5")
    assert {"best.ckpt", "last.ckpt"} <= set(written)


def test_a_configured_checkpoint_io_is_kept() -> None:
    """The CLI adds AtomicCheckpointIO to the trainer's plugins unless they bring their own CheckpointIO."""
    own = TorchCheckpointIO()
    assert with_atomic_io([own]) == [own]
    (added,) = with_atomic_io(None)
    assert isinstance(added, AtomicCheckpointIO)
    assert with_atomic_io("bf16-mixed")[0] == "bf16-mixed"
