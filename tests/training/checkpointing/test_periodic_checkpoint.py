"""--run.save_every_n_steps / --run.save_every_minutes write last.ckpt between validations."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from tests.training.resume_runs import fit, write_config
from tetraformer.training.checkpointing.atomic_io import AtomicCheckpointIO
from tetraformer.training.checkpointing.periodic import PeriodicCheckpoint


@pytest.fixture
def last_saves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The global step of every last.ckpt write of the fits the test runs."""
    steps: list[int] = []
    save = AtomicCheckpointIO.save_checkpoint

    def spy(self: AtomicCheckpointIO, checkpoint: dict, path: Path, storage_options: object = None) -> None:
        if Path(path).name == "last.ckpt":
            steps.append(checkpoint["global_step"])
        save(self, checkpoint, path, storage_options)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", spy)
    return steps


@pytest.mark.parametrize(
    ("option", "saved"),
    [(("--run.save_every_n_steps", "3"), [3, 6, 9]), (("--run.save_every_minutes", "1e-6"), list(range(1, 10)))],
    ids=["every-3-steps", "every-few-microseconds"],
)
@pytest.mark.slow
def test_last_checkpoint_between_validations(
    option: tuple[str, str], saved: list[int], last_saves: list[int], tmp_path: Path
) -> None:
    """With no validation before step 10, last.ckpt is written on the period's steps, then at the final step."""
    config = write_config(tmp_path, tmp_path / "run", val_check_interval=100)
    fit(config, "--trainer.max_steps", "10", *option)
    assert [step for step in last_saves if step < 10] == saved
    assert set(last_saves) - set(saved) == {10}


def test_minutes_count_from_the_last_write() -> None:
    """On a fake clock of 25 s a step, every 1 minute saves at steps 3, 6, 9; a validation (which writes
    last.ckpt) at step 4 restarts the count, moving the next save to step 7."""

    def run(validate_at: int | None) -> list[int]:
        now = [0.0]
        callback = PeriodicCheckpoint(every_minutes=1, clock=lambda: now[0])
        saved: list[int] = []
        trainer = SimpleNamespace(
            global_step=0,
            should_stop=False,
            max_steps=100,
            world_size=1,
            sanity_checking=False,
            checkpoint_callback=ModelCheckpoint(dirpath="ckpts"),
            save_checkpoint=lambda path, **_: saved.append((trainer.global_step, Path(path).name)),
        )
        callback.on_train_start(trainer, None)
        for step in range(1, 11):
            now[0] += 25
            trainer.global_step = step
            callback.on_train_batch_end(trainer, None, None, None, step - 1)
            if step == validate_at:
                callback.on_validation_end(trainer, None)
        assert {name for _, name in saved} == {"last.ckpt"}
        return [step for step, _ in saved]

    assert run(validate_at=None) == [3, 6, 9]
    assert run(validate_at=4) == [3, 7, 10]


def test_periods_must_be_positive() -> None:
    """A zero or negative period is refused with the option's name."""
    with pytest.raises(ValueError, match="save_every_n_steps"):
        PeriodicCheckpoint(every_n_steps=0)
    with pytest.raises(ValueError, match="save_every_minutes"):
        PeriodicCheckpoint(every_minutes=0)
