"""How many optimizer steps a run's learning-rate schedule spans, and which trainer settings say so."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lightning.pytorch.callbacks import Timer

from tetraformer.training.callbacks.token_budget import TokenBudget, token_budget


@dataclass(frozen=True)
class TokenSteps:
    """The optimizer steps a --run.max_tokens budget lasts: `tokens` trained on over `span` optimizer steps (1: every
    step trains on the same tokens; an epoch's steps: rows of varying length, counted at their mean)."""

    budget: int  # --run.max_tokens
    tokens: int  # tokens `span` optimizer steps train on, over all ranks and accumulated batches
    span: int = 1

    @property
    def steps(self) -> int:
        """The step whose tokens reach the budget (at the mean, for rows of varying length), rounded up."""
        return -(-self.budget * self.span // self.tokens)

    def sized_by(self) -> str:
        """The settings that give this length, for the schedule's log lines."""
        if self.span == 1:
            return f"--run.max_tokens {self.budget:,} at {self.tokens:,} tokens an optimizer step"
        return (
            f"--run.max_tokens {self.budget:,} at about {self.tokens / self.span:,.0f} tokens an optimizer step "
            f"(an epoch's {self.tokens:,} tokens over its {self.span:,} steps)"
        )


def token_steps(trainer: Any) -> TokenSteps | None:
    """The steps a --run.max_tokens budget lasts: rows of one length (`TaskModule.row_tokens`: blocks, images) give
    them exactly, rows of varying length (padded text) at an epoch's mean (the spec's `training.epoch_tokens`, read
    from the stored rows); None without a budget or a data spec, or when neither is known (rows a batch draws anew)."""
    budget = token_budget(trainer)
    module = getattr(trainer, "lightning_module", None)
    training = getattr(getattr(module, "spec", None), "training", None)  # the data's batching, handed over in its spec
    if budget is None or training is None:
        return None
    row = module.row_tokens()
    if row is not None:
        return TokenSteps(budget, row * training.batch_size * trainer.accumulate_grad_batches * trainer.world_size)
    batches = trainer.num_training_batches
    if not training.epoch_tokens or not math.isfinite(batches) or batches <= 0:
        return None
    return TokenSteps(budget, training.epoch_tokens, steps_per_epoch(trainer))


def schedule_length(trainer: Any) -> tuple[int | None, str]:
    """The run's optimizer steps (None when nothing bounds them: a run that ends by --trainer.max_time alone, by
    --run.max_tokens over a stream of padded text, or a streamed dataset with neither) and the settings that set them.

    Lightning's estimate is the nearer of max_steps and max_epochs x ceil(batches per device / accumulation); a
    token budget gives its own count (token_steps), and the nearest wins.
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


def end_budget_with_schedule(trainer: Any, total_steps: int | None) -> None:
    """Where the token budget sized the schedule, its TokenBudget ends the run on the schedule's last step: rows of
    varying length reach the budget a few steps before or after their mean says, and the decay ends with the run."""
    sized = token_steps(trainer)
    if sized is None or sized.steps != total_steps:
        return
    for callback in trainer.callbacks:
        if isinstance(callback, TokenBudget):
            callback.last_step = total_steps


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
