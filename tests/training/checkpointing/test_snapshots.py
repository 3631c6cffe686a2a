"""--run.keep_every_n_steps keeps checkpoints/step-N.ckpt: one starting point per training budget."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.training.resume_runs import fit, write_config
from tetraformer.training.checkpointing.snapshots import StepSnapshots


@pytest.mark.slow
def test_snapshots_are_kept_and_fine_tune_from(tmp_path: Path) -> None:
    """A 7-step run keeping every 3rd step leaves step-3 and step-6 beside last.ckpt, weights without optimizer
    state, different from each other; a new run starts from one through --model.init_from with its weights."""
    run = tmp_path / "run"
    fit(
        write_config(tmp_path, run, val_check_interval=100), "--trainer.max_steps", "7", "--run.keep_every_n_steps", "3"
    )
    folder = run / "checkpoints"
    assert sorted(p.name for p in folder.glob("step-*.ckpt")) == ["step-3.ckpt", "step-6.ckpt"]
    early, late = (torch.load(folder / f"step-{n}.ckpt", weights_only=False) for n in (3, 6))
    assert (early["global_step"], late["global_step"]) == (3, 6)
    assert "optimizer_states" not in early and "state_dict" in early
    assert any(not torch.equal(early["state_dict"][k], late["state_dict"][k]) for k in early["state_dict"])

    ends = {}
    for name, extra in (("started", ("--model.init_from", str(folder / "step-6.ckpt"))), ("fresh", ())):
        fit(write_config(tmp_path, tmp_path / name), "--trainer.max_steps", "1", *extra)
        ends[name] = torch.load(tmp_path / name / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]

    def distance(weights: dict[str, torch.Tensor]) -> float:
        return sum((weights[k].float() - late["state_dict"][k].float()).norm().item() for k in weights)

    assert ends["started"].keys() == late["state_dict"].keys()
    assert distance(ends["started"]) < distance(ends["fresh"]) / 10  # one step away from the snapshot


def test_one_snapshot_per_step_under_accumulation() -> None:
    """Gradient accumulation repeats a global step over several batches: the snapshot is written once."""
    saved: list[str] = []
    trainer = SimpleNamespace(global_step=0, save_checkpoint=lambda path, **kw: saved.append((Path(path).name, kw)))
    callback = StepSnapshots(Path("ckpts"), every_n_steps=2)
    for batch, step in enumerate([0, 1, 1, 2, 2, 3, 3, 4, 4]):  # two micro-batches per optimizer step
        trainer.global_step = step
        callback.on_train_batch_end(trainer, None, None, None, batch)
    assert saved == [("step-2.ckpt", {"weights_only": True}), ("step-4.ckpt", {"weights_only": True})]


def test_period_must_be_positive() -> None:
    """Zero steps is refused with the option's name."""
    with pytest.raises(ValueError, match="keep_every_n_steps"):
        StepSnapshots(Path("ckpts"), every_n_steps=0)
