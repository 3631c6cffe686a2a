"""How long a run's schedule is: max_steps, max_epochs x steps an epoch, or a token budget over rows of one length."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from lightning.pytorch.callbacks import Timer

from tetraformer.data.spec import DataSpec, TrainingBatches
from tetraformer.training.base.run_length import (
    early_stops,
    end_budget_with_schedule,
    late_validation,
    passes_over_data,
    schedule_length,
    token_steps,
)
from tetraformer.training.callbacks.token_budget import TokenBudget

STOPS = ("--trainer.max_time", "--run.max_tokens")


def trainer_of(estimate: float, max_steps: int = -1, max_epochs: int = -1, **extra: Any) -> SimpleNamespace:
    """A stand-in Trainer with what schedule_length reads: 78 batches an epoch, accumulating 2, one rank."""
    fields = {"num_training_batches": 78, "accumulate_grad_batches": 2, "world_size": 1, "callbacks": []}
    fields |= {"estimated_stepping_batches": estimate, "max_steps": max_steps, "max_epochs": max_epochs}
    return SimpleNamespace(**(fields | extra))


def budgeted(
    estimate: float, tokens: int, row: int | None, batch: int = 16, epoch: int | None = None, **extra: Any
) -> SimpleNamespace:
    """A stand-in Trainer with a --run.max_tokens budget and a module whose rows hold `row` tokens (None: varying)
    and whose data spec says `batch` rows a batch and `epoch` tokens an epoch (padded text; None: not known)."""
    spec = DataSpec(training=TrainingBatches(batch, epoch))
    return trainer_of(
        estimate,
        callbacks=[TokenBudget(tokens, counter=None)],
        lightning_module=SimpleNamespace(row_tokens=lambda: row, spec=spec),
        **extra,
    )


@pytest.mark.parametrize(
    ("max_steps", "max_epochs", "estimate", "expected"),
    [
        (100, -1, 100, (100, "--trainer.max_steps 100")),
        (-1, 10, 390, (390, "--trainer.max_epochs 10 x 39 optimizer steps an epoch")),
        (1000, 10, 390, (390, "--trainer.max_epochs 10 x 39 optimizer steps an epoch")),
        (50, 10, 50, (50, "--trainer.max_steps 50")),
    ],
)
def test_schedule_length_names_what_bounds_the_run(
    max_steps: int, max_epochs: int, estimate: int, expected: tuple
) -> None:
    """Lightning's estimate (the nearer of max_steps and max_epochs x 39 steps an epoch), with what bounds it."""
    assert schedule_length(trainer_of(estimate, max_steps, max_epochs)) == expected


@pytest.mark.parametrize(("max_steps", "max_epochs", "estimate"), [(-1, -1, math.inf), (-1, 5, -1)])
def test_schedule_length_is_unknown_without_a_bound(max_steps: int, max_epochs: int, estimate: float) -> None:
    """A run bounded by time alone, or a streamed dataset without max_steps, has no known length."""
    total, why = schedule_length(trainer_of(estimate, max_steps, max_epochs))
    assert total is None and "--trainer.max_steps" in why


@pytest.mark.parametrize(("accumulate", "ranks"), [(1, 1), (2, 1), (1, 4), (4, 2)])
def test_a_token_budget_over_rows_of_one_length_sizes_the_schedule(accumulate: int, ranks: int) -> None:
    """max_tokens / (row tokens x batch x accumulation x ranks), rounded up: the step TokenBudget stops on."""
    trainer = budgeted(math.inf, 1_000_000, row=256, accumulate_grad_batches=accumulate, world_size=ranks)
    per_step = 256 * 16 * accumulate * ranks
    total, why = schedule_length(trainer)
    assert total == math.ceil(1_000_000 / per_step) and (total - 1) * per_step < 1_000_000 <= total * per_step
    assert why == f"--run.max_tokens 1,000,000 at {per_step:,} tokens an optimizer step"


def test_the_nearer_of_a_token_budget_and_steps_or_epochs_sizes_it() -> None:
    """A budget of 62 steps (4,096 tokens each) under max_steps 100 sizes the run; over max_steps 40 it does not."""
    assert schedule_length(budgeted(100, 250_000, row=256, max_steps=100, accumulate_grad_batches=1))[0] == 62
    assert schedule_length(budgeted(40, 250_000, row=256, max_steps=40, accumulate_grad_batches=1)) == (
        40,
        "--trainer.max_steps 40",
    )


@pytest.mark.parametrize(("epoch", "budget", "steps"), [(120_000, 250_000, 82), (117_000, 234_000, 78), (3_900, 1, 1)])
def test_a_token_budget_over_rows_of_varying_length_is_steps_at_an_epochs_mean(
    epoch: int, budget: int, steps: int
) -> None:
    """Padded text: an epoch's stored tokens over its 39 optimizer steps (78 batches, accumulating 2) give the mean a
    step trains on; the budget is the steps that mean reaches it in, rounded up (two whole epochs: exactly 78)."""
    trainer = budgeted(math.inf, budget, row=None, epoch=epoch, max_epochs=100)
    total, why = schedule_length(trainer)
    assert total == steps == math.ceil(budget * 39 / epoch)
    mean = f"at about {epoch / 39:,.0f} tokens an optimizer step (an epoch's {epoch:,} tokens over its 39 steps)"
    assert why == f"--run.max_tokens {budget:,} {mean}"
    assert early_stops(trainer) == ()


def test_a_token_budget_without_the_datas_batches_leaves_the_length_to_steps_or_epochs() -> None:
    """Without a data spec (a Trainer driven by hand, no handover), or over padded text without an end, tokens
    cannot be turned into steps: the budget only stops the run, and says so."""
    unhanded = budgeted(390, 250_000, row=256, max_epochs=10)
    unhanded.lightning_module.spec = None
    endless = budgeted(390, 250_000, row=None, epoch=120_000, max_epochs=10, num_training_batches=math.inf)
    assert token_steps(unhanded) is None and token_steps(endless) is None
    assert early_stops(endless) == ("--run.max_tokens",)


def test_the_budget_ends_the_run_on_the_schedule_it_sized() -> None:
    """Where the budget sized the schedule its TokenBudget stops on the last step, not on its token count; where
    max_steps was nearer it keeps counting tokens (the steps end the run first)."""
    sized = budgeted(math.inf, 250_000, row=None, epoch=120_000, max_epochs=100)
    end_budget_with_schedule(sized, schedule_length(sized)[0])
    assert sized.callbacks[0].last_step == 82
    capped = budgeted(40, 250_000, row=None, epoch=120_000, max_steps=40)
    end_budget_with_schedule(capped, schedule_length(capped)[0])
    assert capped.callbacks[0].last_step is None


def test_a_token_budget_over_rows_of_varying_length_leaves_the_length_to_steps_or_epochs() -> None:
    """Padded text whose data cannot count its tokens (row_tokens None, no epoch_tokens: span corruption): the
    budget only stops the run, and says so."""
    trainer = budgeted(390, 250_000, row=None, max_epochs=10)
    assert token_steps(trainer) is None
    assert schedule_length(trainer)[0] == 390 and early_stops(trainer) == ("--run.max_tokens",)
    assert schedule_length(budgeted(math.inf, 250_000, row=None))[0] is None


def test_a_token_budget_that_sizes_the_schedule_is_not_an_early_stop() -> None:
    """TokenBudget stops on the schedule's last step when it sized it, and after it when steps are nearer."""
    assert early_stops(budgeted(math.inf, 250_000, row=256)) == ()
    assert early_stops(budgeted(40, 250_000, row=256, max_steps=40)) == ()


def test_early_stops_names_the_limits_the_trainer_has() -> None:
    """A Timer callback is --trainer.max_time, a TokenBudget --run.max_tokens; other callbacks are neither."""
    timer, budget = Timer(duration="00:00:01:00"), TokenBudget(1000, counter=None)
    assert early_stops(trainer_of(1, callbacks=[timer, budget])) == STOPS
    assert early_stops(trainer_of(1, callbacks=[budget])) == ("--run.max_tokens",)
    assert early_stops(trainer_of(1)) == ()


def test_passes_over_data_counts_epochs_of_optimizer_steps() -> None:
    """78 batches accumulated by 2 are 39 steps an epoch; a stream (no length) or an unsized run has no count."""
    assert passes_over_data(trainer_of(1), 390) == 10
    assert passes_over_data(trainer_of(1, num_training_batches=math.inf), 390) is None
    assert passes_over_data(trainer_of(1), None) is None


@pytest.mark.parametrize(
    ("total", "interval", "every", "late"),
    [
        (20, 1.0, 1, True),
        (38, 1.0, 1, True),
        (39, 1.0, 1, False),
        (10, 0.25, 1, False),
        (9, 0.25, 1, True),
        (50, 1.0, 2, True),
        (20, 50, None, False),
        (None, 1.0, 1, False),
    ],
)
def test_validation_that_would_come_after_the_last_step_is_one_line(
    total: int | None, interval: float, every: int | None, late: bool
) -> None:
    """39 steps an epoch: a run that ends before the share of an epoch it validates at says so, naming the fix;
    validation by batch count (every None) or a run of unknown length is quiet."""
    trainer = trainer_of(1, val_check_interval=interval, check_val_every_n_epoch=every, limit_val_batches=1.0)
    line = late_validation(trainer, total)
    assert (line is not None) == late
    if late:
        assert "validates only on its last step" in line and "--trainer.check_val_every_n_epoch null" in line


def test_token_budget_stops_on_its_last_step_once_set() -> None:
    """With `last_step` the budget ends the run on that optimizer step whatever its token count says; without it,
    on the batch whose tokens reach the budget."""
    counter = SimpleNamespace(tokens_seen=0)
    budget = TokenBudget(1000, counter=counter)
    trainer = SimpleNamespace(should_stop=False, global_step=5)
    counter.tokens_seen = 1000
    budget.on_train_batch_end(trainer, None, None, None, 0)
    assert trainer.should_stop
    budget.last_step, trainer.should_stop = 6, False
    budget.on_train_batch_end(trainer, None, None, None, 0)
    assert not trainer.should_stop
    trainer.global_step, counter.tokens_seen = 6, 900
    budget.on_train_batch_end(trainer, None, None, None, 0)
    assert trainer.should_stop
