"""Non-finite losses and gradients: stop the run on every rank before the bad update, or skip that batch.

`--run.on_nonfinite stop` (the default) ends training with one line naming the step, the last good checkpoint and
the learning rate; `skip` drops the batch's gradients so the optimizer leaves weights and state alone, and counts it
(`train/nonfinite_skipped`, kept in checkpoints). The decision is reduced over ranks, so all stop or skip together.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor
from torch.nn.utils import get_total_norm

from tetraformer.errors import TetraformerError
from tetraformer.training.checkpointing.periodic import last_ckpt
from tetraformer.training.reports.loggers import logs_this_step

log = logging.getLogger(__name__)
NonFiniteMode = Literal["stop", "skip"]


class NonFiniteError(TetraformerError):
    """Training met a non-finite loss or gradient norm and stopped before applying it."""


class NonFiniteGuard(Callback):
    """Checks each optimizer step's loss and gradient norm (one fused norm, one host sync) before the update.

    Under a gradient scaler (16-mixed) inf gradients are part of its scale search and it skips those steps
    itself, so only the loss is judged there.
    """

    def __init__(self, mode: NonFiniteMode = "stop") -> None:
        self.mode = mode
        self.skipped = 0
        # the step's loss so far: the sum of its micro-batches' losses (Lightning divides each by their number)
        self._loss: Tensor | None = None

    def state_dict(self) -> dict[str, Any]:
        """The batches skipped so far, saved in checkpoints."""
        return {"nonfinite_skipped": self.skipped}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the count of the run a checkpoint resumes."""
        self.skipped = state_dict.get("nonfinite_skipped", 0)

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: Tensor) -> None:
        """Add this micro-batch's loss to the step's (no host sync): one non-finite part makes the sum non-finite."""
        loss = loss.detach().float().sum()
        self._loss = loss if self._loss is None else self._loss + loss

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        """Stop, or drop the gradients, when any rank's loss or gradient norm is not finite."""
        loss, self._loss = self._loss, None
        params = (p for group in optimizer.param_groups for p in group["params"])  # no walk over the modules
        norm = None if gradient_scaler_active(trainer) else gradient_norm(params)
        finite = torch.ones((), dtype=torch.bool, device=pl_module.device)
        if loss is not None:
            finite &= torch.isfinite(loss)
        if norm is not None:
            finite &= torch.isfinite(norm)
        ranks_in_trouble = trainer.strategy.reduce((~finite).int(), reduce_op="sum")
        if not ranks_in_trouble.item():  # the step's one host sync, after the reduce over ranks
            if hasattr(pl_module, "step_gradient_norm"):
                pl_module.step_gradient_norm = norm  # clipping by norm reads it instead of measuring it again
            return
        what = describe(loss, norm, trainer)
        if self.mode == "stop":
            raise NonFiniteError(stop_message(trainer, optimizer, what))
        optimizer.zero_grad(set_to_none=True)  # no gradient: the optimizer leaves weights and its state alone
        self.skipped += 1
        log.warning("step %d: %s: skipped this batch (%d skipped so far)", trainer.global_step, what, self.skipped)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Log the count of skipped batches on the rows Lightning writes (skip mode only)."""
        if self.mode == "skip" and logs_this_step(trainer):
            pl_module.log("train/nonfinite_skipped", float(self.skipped), on_step=True, on_epoch=False)


def gradient_scaler_active(trainer: L.Trainer) -> bool:
    """Whether a gradient scaler (16-mixed) steps the optimizer, skipping inf gradients itself."""
    return getattr(trainer.precision_plugin, "scaler", None) is not None


def gradient_norm(params: Iterable[Tensor]) -> Tensor | None:
    """The L2 norm of the parameters' gradients (foreach kernels, no host sync), or None when there are none."""
    grads = [p.grad for p in params if p.grad is not None]
    return get_total_norm(grads) if grads else None


def describe(loss: Tensor | None, norm: Tensor | None, trainer: L.Trainer) -> str:
    """What this rank saw: its non-finite loss or gradient norm, or that another rank saw one."""
    found = []
    if loss is not None and not torch.isfinite(loss):
        found.append(f"the training loss is {loss.item()}")
    if norm is not None and not torch.isfinite(norm):
        found.append(f"the gradient norm is {norm.item()}")
    where = f"rank {trainer.global_rank}: " if trainer.world_size > 1 else ""
    return where + (" and ".join(found) if found else "a non-finite loss or gradient on another rank")


def stop_message(trainer: L.Trainer, optimizer: torch.optim.Optimizer, what: str) -> str:
    """One line: the step, what went wrong, the last good checkpoint, the learning rate and what to try."""
    lr = optimizer.param_groups[0]["lr"]
    return (
        f"step {trainer.global_step}: {what}; stopped before applying this update. Last good checkpoint: "
        f"{last_good_checkpoint(trainer)}; learning rate {lr:.3g}. Lower the learning rate, warm up longer or "
        "clip gradients (--trainer.gradient_clip_val), or skip such batches with --run.on_nonfinite skip"
    )


def last_good_checkpoint(trainer: L.Trainer) -> str:
    """'PATH (step N)' of the newest checkpoint the run's checkpoint callbacks wrote, or that there is none yet."""
    paths = []
    for callback in trainer.checkpoint_callbacks:
        if getattr(callback, "dirpath", None):
            paths.append(last_ckpt(callback))
        if getattr(callback, "best_model_path", ""):
            paths.append(Path(callback.best_model_path))
    steps = {path: checkpoint_step(path) for path in paths if path.is_file()}
    if not steps:
        return "none written yet"
    path = max(steps, key=lambda p: -1 if steps[p] is None else steps[p])
    return f"{path} (step {steps[path]})" if steps[path] is not None else str(path)


def checkpoint_step(path: Path) -> int | None:
    """The global step a checkpoint file was saved at, read without loading its tensors (memory-mapped)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("global_step")
    except Exception:  # noqa: BLE001 - only for a message: an unreadable file has no step to tell
        return None
