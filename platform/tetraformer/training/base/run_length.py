"""How many optimizer steps a run's learning-rate schedule spans, and which trainer settings say so."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lightning.pytorch.callbacks import Timer

from tetraformer.training.callbacks.token_budget import TokenBudget, token_budget


@dataclass(frozen=True)
class TokenSteps:
    """The optimizer steps a --run.max_tokens budget lasts, where every training batch holds the same tokens."""

    budget: int  # --run.max_tokens
    per_step: int  # tokens an optimizer step trains on, over all ranks and accumulated batches

    @property
    def steps(self) -> int:
        """The step whose tokens reach the budget, where TokenBudget stops the run."""
        return math.ceil(self.budget / self.per_step)

    def sized_by(self) -> str:
        """The settings that give this length, for the schedule's log lines."""
        return f"--run.max_tokens {self.budget:,} at {self.per_step:,} tokens an optimizer step"


def token_steps(trainer: Any) -> TokenSteps | None:
    """The steps a --run.max_tokens budget lasts: None without one, or when the task's rows hold varying tokens
    (padded text: `TaskModule.row_tokens` is None) or the batch size is unknown."""
    budget = token_budget(trainer)
    module, data = getattr(trainer, "lightning_module", None), getattr(trainer, "datamodule", None)
    row = module.row_tokens() if budget is not None and hasattr(module, "row_tokens") else None
    batch = getattr(data, "batch_size", None)
    if budget is None or row is None or not isinstance(batch, int):
        return None
    return TokenSteps(budget, row * batch * trainer.accumulate_grad_batches * trainer.world_size)


def schedule_length(trainer: Any) -> tuple[int | None, str]:
    """The run's optimizer steps (None when nothing bounds them: a run that ends by --trainer.max_time alone, by
    --run.max_tokens over rows of varying length, or a streamed dataset with neither) and the settings that set them.

    Lightning's estimate is the nearer of max_steps and max_epochs x ceil(batches per device / accumulation); a
    token budget over rows of one length (language-model blocks, images) gives its own count, and the nearest wins.
    """
    total = trainer.estimated_stepping_batches
    by_tokens = token_steps(trainer)
    finite = math.isfinite(total) and total > 0
    if by_tokens is not None and (not finite or by_tokens.steps < total):
        return by_tokens.steps, by_tokens.sized_by()
    if not finite:
        if trainer.max_steps == -1 and trainer.max_epochs == -1:
            return None, "no --trainer.max_steps or --trainer.max_epochs: it ends by time or tokens"
        return None, "the training data has no length and --trainer.max_steps is not set"
    total = int(total)
    if trainer.max_steps != -1 and total == trainer.max_steps:
        return total, f"--trainer.max_steps {total}"
    return total, f"--trainer.max_epochs {trainer.max_epochs} x {steps_per_epoch(trainer)} optimizer steps an epoch"


def steps_per_epoch(trainer: Any) -> int:
    """Optimizer steps an epoch: its batches on one device over the accumulation, rounded up."""
    return math.ceil(trainer.num_training_batches / trainer.accumulate_grad_batches)


def passes_over_data(trainer: Any, total_steps: int | None) -> float | None:
    """How many times a run of `total_steps` optimizer steps reads its training data (None: the data has no length)."""
    batches = trainer.num_training_batches
    if total_steps is None or not math.isfinite(batches) or batches <= 0:
        return None
    return total_steps / steps_per_epoch(trainer)


def early_stops(trainer: Any) -> tuple[str, ...]:
    """The limits besides steps and epochs that may end the run before its schedule does: --trainer.max_time,
    --run.max_tokens (not when it sized the schedule: then it ends the run on the schedule's last step)."""
    kinds = {type(callback) for callback in trainer.callbacks}
    named = [("--trainer.max_time", Timer)]
    if token_steps(trainer) is None:
        named.append(("--run.max_tokens", TokenBudget))
    return tuple(option for option, kind in named if any(issubclass(k, kind) for k in kinds))


def late_validation(trainer: Any, total_steps: int | None) -> str | None:
    """A line when validation, set as a share of an epoch, would first come after the run's last step (a token or
    step budget that reads part of a big text): the run then validates only on that step, and best.ckpt sees one
    score. None when it validates in time, by batch count, or not at all."""
    interval, every = trainer.val_check_interval, trainer.check_val_every_n_epoch
    passes = passes_over_data(trainer, total_steps)
    if not isinstance(interval, float) or every is None or passes is None or not trainer.limit_val_batches:
        return None
    if passes >= interval * every:
        return None
    return (
        f"this run ends {passes:.0%} of the way through its training data, before its first validation "
        f"(--trainer.val_check_interval {interval} of an epoch, every {every} epoch(s)): it validates only on its "
        "last step; --trainer.val_check_interval N --trainer.check_val_every_n_epoch null validates every N batches"
    )
