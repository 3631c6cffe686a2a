"""How many optimizer steps a run's learning-rate schedule spans, and which trainer settings say so."""

from __future__ import annotations

import math
from typing import Any


def schedule_length(trainer: Any) -> tuple[int | None, str]:
    """The run's optimizer steps (None when nothing bounds them: a run that ends by --trainer.max_time or
    --run.max_tokens alone, or a streamed dataset without --trainer.max_steps) and the settings that set them.

    Lightning's estimate is the nearer of max_steps and max_epochs x ceil(batches per device / accumulation).
    """
    total = trainer.estimated_stepping_batches
    if not math.isfinite(total) or total <= 0:
        if trainer.max_steps == -1 and trainer.max_epochs == -1:
            return None, "no --trainer.max_steps or --trainer.max_epochs: it ends by time or tokens"
        return None, "the training data has no length and --trainer.max_steps is not set"
    total = int(total)
    if trainer.max_steps != -1 and total == trainer.max_steps:
        return total, f"--trainer.max_steps {total}"
    per_epoch = math.ceil(trainer.num_training_batches / trainer.accumulate_grad_batches)
    return total, f"--trainer.max_epochs {trainer.max_epochs} x {per_epoch} optimizer steps an epoch"


def early_stops(trainer: Any) -> tuple[str, ...]:
    """The limits besides steps and epochs that may end the run before its schedule does: --trainer.max_time,
    --run.max_tokens."""
    from lightning.pytorch.callbacks import Timer

    from tetraformer.training.callbacks.defaults import TokenBudget  # imported here: it imports the task modules

    kinds = {type(callback) for callback in trainer.callbacks}
    named = (("--trainer.max_time", Timer), ("--run.max_tokens", TokenBudget))
    return tuple(option for option, kind in named if any(issubclass(k, kind) for k in kinds))
