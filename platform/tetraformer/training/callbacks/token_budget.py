"""TokenBudget: ends a run once it has trained on --run.max_tokens tokens."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from tetraformer.training.callbacks.throughput import Throughput


class TokenBudget(Callback):
    """Stops training once the run has trained on `max_tokens` tokens (or images): `--run.max_tokens N`.

    It reads the run's one token count, `Throughput.tokens_seen` (all ranks, kept in checkpoints, so a resumed
    run stops at the same total): the Throughput callback must come before it. Where the budget sized the
    learning-rate schedule (run_length.end_budget_with_schedule sets `last_step`), it stops on the schedule's last
    optimizer step instead, which the budget's tokens reach exactly for rows of one length and at their mean
    for padded text.
    """

    def __init__(self, max_tokens: int, counter: Throughput) -> None:
        self.max_tokens = max_tokens
        self.counter = counter
        self.last_step: int | None = None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Stop after the batch that reaches the budget (Throughput has counted it), or the schedule's last step."""
        if self.last_step is None:
            reached = self.counter.tokens_seen >= self.max_tokens
        else:
            reached = trainer.global_step >= self.last_step
        if reached:
            trainer.should_stop = True


def token_budget(trainer: Any) -> int | None:
    """The run's --run.max_tokens (its TokenBudget callback's), None when it has none."""
    budgets = [callback.max_tokens for callback in trainer.callbacks if isinstance(callback, TokenBudget)]
    return min(budgets) if budgets else None
