"""DataPosition: a resumed run whose schedule is sized by epochs continues at the checkpoint's next batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from tetraformer.training.checkpointing.resume import DataPosition, ResumableLoader

ROWS, BATCH, EPOCHS = 12, 2, 2  # 6 batches an epoch


class Recorder(L.LightningModule):
    """Records the batches it trains on; sizes its (constant) schedule by `estimated_stepping_batches`, as
    TaskModule.configure_optimizers does."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.seen: list[list[int]] = []

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        """Note the batch; a loss that trains the one weight."""
        self.seen.append(batch.tolist())
        return (self.weight - batch.float().mean()) ** 2

    def train_dataloader(self) -> ResumableLoader:
        """Shuffled rows, each epoch its own order."""
        return ResumableLoader(list(range(ROWS)), batch_size=BATCH, shuffle=True, seed=3)

    def configure_optimizers(self) -> Any:
        """SGD over as many steps as the trainer estimates (the call that builds the loader before a restore)."""
        assert self.trainer.estimated_stepping_batches > 0  # with max_epochs, Lightning builds the loader here
        return torch.optim.SGD(self.parameters(), lr=0.1)


class SaveAt(L.Callback):
    """Writes a full checkpoint at the end of optimizer step `step`, mid-run (as PeriodicCheckpoint does)."""

    def __init__(self, step: int, path: Path) -> None:
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        """Save on the chosen step."""
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def fit(callbacks: list[L.Callback], ckpt_path: Path | None = None) -> list[list[int]]:
    """The batches a run of `Recorder` over both epochs trains on, from scratch or from `ckpt_path`."""
    trainer = L.Trainer(
        max_epochs=EPOCHS,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    module = Recorder()
    trainer.fit(module, ckpt_path=ckpt_path)
    return module.seen


@pytest.mark.parametrize("step", [3, 6, 8])  # mid-epoch, at an epoch's end, in the second epoch
def test_resume_continues_at_the_checkpoints_next_batch(step: int, tmp_path: Path) -> None:
    """Resumed from the checkpoint of step `step`: the batches trained on are those of the run that never stopped."""
    whole = fit([DataPosition(), SaveAt(step, tmp_path / "step.ckpt")])
    assert whole[:step] + fit([DataPosition()], ckpt_path=tmp_path / "step.ckpt") == whole


def test_without_it_lightning_starts_the_epoch_again(tmp_path: Path) -> None:
    """The control: Lightning alone drops the loader state when the schedule is sized by epochs (#20550)."""
    whole = fit([SaveAt(3, tmp_path / "step.ckpt")])
    assert fit([], ckpt_path=tmp_path / "step.ckpt")[:3] == whole[:3]
