"""Fault injection for the non-finite guard: a tiny regression module whose loss or gradients go bad on chosen
steps, a recorder of weights around each step, and a language model whose loss turns NaN (for CLI runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from tasks.language_modeling.module import LanguageModeling
from tetraformer.training.callbacks.numerics import NonFiniteError, NonFiniteGuard


class InfGradient(torch.autograd.Function):
    """Identity forward, infinite gradient backward: a finite loss whose gradients overflow."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        """Pass the loss through."""
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        """Send back an infinite gradient."""
        return grad * float("inf")


class Regression(L.LightningModule):
    """A linear layer fitted with AdamW; its loss is NaN on `nan_steps` (optimizer steps) and `nan_batches` (batch
    indices, for gradient accumulation), and only its gradients are inf on `inf_grad_steps`."""

    def __init__(
        self,
        nan_steps: tuple[int, ...] = (),
        inf_grad_steps: tuple[int, ...] = (),
        nan_batches: tuple[int, ...] = (),
    ) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.nan_steps, self.inf_grad_steps, self.nan_batches = nan_steps, inf_grad_steps, nan_batches

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        """Mean squared error, poisoned on the chosen steps."""
        x, y = batch
        loss = nn.functional.mse_loss(self.linear(x), y)
        if self.global_step in self.nan_steps or batch_idx in self.nan_batches:
            loss = loss * float("nan")
        return InfGradient.apply(loss) if self.global_step in self.inf_grad_steps else loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """AdamW with weight decay, so a zero gradient would still move the weights: only no gradient leaves them."""
        return torch.optim.AdamW(self.parameters(), lr=0.1, weight_decay=0.1)

    def train_dataloader(self) -> DataLoader:
        """32 seeded samples of a linear target, 4 per batch."""
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(32, 4, generator=generator)
        return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)


class WeightRecorder(Callback):
    """The weights before and after each optimizer step, by step, and the optimizer's per-parameter step count."""

    def __init__(self) -> None:
        self.before: dict[int, Tensor] = {}
        self.after: dict[int, Tensor] = {}

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Snapshot the weights the step starts from."""
        self.before[trainer.global_step] = flat_weights(pl_module)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Snapshot the weights the step left (global_step has counted it already)."""
        self.after[trainer.global_step - 1] = flat_weights(pl_module)


def flat_weights(module: nn.Module) -> Tensor:
    """All parameters as one detached vector."""
    return torch.cat([p.detach().flatten() for p in module.parameters()]).clone()


@dataclass
class RegressionRun:
    """A Regression fit with the non-finite guard and a weight recorder, built by `regression_run`."""

    module: Regression
    guard: NonFiniteGuard
    recorder: WeightRecorder
    trainer: L.Trainer

    def fit(self) -> None:
        """Train (raises what the guard raises)."""
        self.trainer.fit(self.module)


def regression_run(
    mode: str, max_steps: int = 6, precision: Any = None, accumulate: int = 1, **faults: Any
) -> RegressionRun:
    """A RegressionRun in `mode` ("stop" or "skip") with the given faults (see Regression)."""
    guard, recorder = NonFiniteGuard(mode), WeightRecorder()
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=max_steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[guard, recorder],
        plugins=[precision] if precision else None,
        accumulate_grad_batches=accumulate,
    )
    return RegressionRun(Regression(**faults), guard, recorder, trainer)


class NaNLanguageModeling(LanguageModeling):
    """The language-modelling task whose training loss is NaN at `nan_step` (on `nan_rank` only, if set); with
    `errors_dir`, each rank writes the error that stopped its step to errors_dir/rankN (forked ranks raise it to
    their launcher, which reports one rank's alone)."""

    def __init__(
        self,
        *args: Any,
        nan_step: int = -1,
        nan_rank: int | None = None,
        errors_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.nan_step, self.nan_rank, self.errors_dir = nan_step, nan_rank, errors_dir

    def optimizer_step(self, *args: Any, **kwargs: Any) -> None:
        """The task's step, writing down a non-finite guard's error before it goes on up."""
        try:
            super().optimizer_step(*args, **kwargs)
        except NonFiniteError as error:
            if self.errors_dir:
                Path(self.errors_dir).mkdir(parents=True, exist_ok=True)
                (Path(self.errors_dir) / f"rank{self.global_rank}").write_text(str(error))
            raise

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        """The task's loss, NaN on the chosen step and rank."""
        loss = super().training_step(batch, batch_idx)
        rank_matches = self.nan_rank is None or self.global_rank == self.nan_rank
        return loss * float("nan") if self.global_step == self.nan_step and rank_matches else loss
