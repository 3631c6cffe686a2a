"""AdamW parameter groups and learning-rate schedules."""

from __future__ import annotations

import logging
import math

import pytest

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.errors import OptionError
from tetraformer.training.base.optim import (
    FEW_STEPS,
    MANY_PASSES,
    OptimizerConfig,
    RunFit,
    build_optimizer,
    check_schedule,
    lr_factor,
    param_groups,
    warmup_steps,
)

STOPS = ("--trainer.max_time", "--run.max_tokens")


def test_no_decay_on_norms_biases_embeddings() -> None:
    """Matrices decay; norms, biases and embeddings (incl. the tied LM head) do not; each param appears once."""
    model = CausalLM(TransformerConfig.preset("tiny"))
    decay, rest = param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    undecayed = {names[id(p)] for p in rest["params"]}
    assert decayed and all(n.endswith(("qkv.weight", "out.weight", "up.weight", "down.weight")) for n in decayed)
    assert "embed.tokens.weight" in undecayed and "embed.positions.weight" in undecayed
    assert any("norm" in n for n in undecayed) and any(n.endswith("bias") for n in undecayed)
    assert len(decay["params"]) + len(rest["params"]) == len(list(model.parameters()))
    assert rest["weight_decay"] == 0.0 and decay["weight_decay"] == 0.1


@pytest.mark.parametrize("schedule", ["cosine", "linear", "constant"])
def test_warmup_then_decay(schedule: str) -> None:
    """Linear warm-up reaches the peak at warmup_steps; decay ends at min_lr_ratio (constant stays at 1)."""
    cfg = OptimizerConfig(schedule=schedule, warmup_steps=10, min_lr_ratio=0.1)
    factors = [lr_factor(s, cfg, total_steps=110) for s in range(111)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert all(a < b for a, b in zip(factors[:9], factors[1:10], strict=True))
    end = 1.0 if schedule == "constant" else 0.1
    assert factors[110] == pytest.approx(end)
    if schedule == "cosine":
        assert factors[60] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    if schedule == "linear":
        assert factors[60] == pytest.approx(0.1 + 0.9 * 0.5)


def test_noam_peaks_at_warmup() -> None:
    """Inverse-sqrt: rises linearly to step = warmup, then decays as step**-0.5."""
    cfg = OptimizerConfig(schedule="noam", warmup_steps=100)
    f = [lr_factor(s, cfg, total_steps=1000, d_model=512) for s in range(1, 1000)]
    peak = max(range(len(f)), key=f.__getitem__) + 1
    assert peak == 100
    assert f[400 - 1] / f[100 - 1] == pytest.approx(0.5, rel=1e-6)  # step**-0.5 after the peak


def test_build_optimizer_steps_the_schedule() -> None:
    """The scheduler multiplies the base lr by the factor of each step."""
    model = CausalLM(TransformerConfig.preset("tiny"))
    optimizer, scheduler = build_optimizer(model, OptimizerConfig(lr=1e-3, warmup_steps=4), 20, 32)
    lrs = []
    for _ in range(4):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3])


def warnings_of(cfg: OptimizerConfig, total: int | None, sized_by: str = "") -> list[str]:
    """check_schedule's WARNING lines."""
    return [line for level, line in check_schedule(cfg, total, RunFit(sized_by)) if level == logging.WARNING]


@pytest.mark.parametrize(
    ("warmup", "total", "says"),
    [(50, 40, "never reaches optim.lr"), (300, 390, "peaks late"), (20, 40, "peaks late")],
)
def test_a_warmup_that_does_not_fit_the_run_is_named(warmup: int, total: int, says: str) -> None:
    """A warm-up of half the optimizer steps or more gets one warning naming the option, its share and the fix."""
    [message] = warnings_of(OptimizerConfig(warmup_steps=warmup), total)
    assert says in message
    assert f"optim.warmup_steps={warmup}" in message and f"{total} optimizer steps" in message


@pytest.mark.parametrize(("warmup", "total", "schedule"), [(0, 10, "cosine"), (19, 40, "linear"), (4000, 100, "noam")])
def test_a_warmup_that_fits_or_a_noam_schedule_is_quiet(warmup: int, total: int, schedule: str) -> None:
    """No warning when the warm-up is under half the run, absent, or noam's (its warm-up sets the peak's step)."""
    assert warnings_of(OptimizerConfig(warmup_steps=warmup, schedule=schedule), total) == []


@pytest.mark.parametrize("total", [7, 40, 390, 1001, 12345])
@pytest.mark.parametrize("fraction", [0.02, 0.1, 0.3])
def test_warmup_fraction_follows_the_run(total: int, fraction: float) -> None:
    """warmup_fraction peaks the rate after that share of the run's steps (at least one), whatever its length."""
    cfg = OptimizerConfig(warmup_fraction=fraction, schedule="linear")
    factors = [lr_factor(s, cfg, total) for s in range(total + 1)]
    peak = factors.index(max(factors)) + 1  # steps taken when the rate first peaks
    assert peak == warmup_steps(cfg, total) == max(round(fraction * total), 1)
    assert factors[-1] == pytest.approx(cfg.min_lr_ratio)  # the decay still ends with the run


def test_warmup_fraction_and_steps_are_one_choice() -> None:
    """Setting both is refused, naming warmup_fraction; an out-of-range fraction too."""
    with pytest.raises(OptionError, match="warmup_fraction"):
        OptimizerConfig(warmup_steps=10, warmup_fraction=0.1)
    with pytest.raises(OptionError, match="warmup_fraction"):
        OptimizerConfig(warmup_fraction=1.0)


def test_a_late_fractional_warmup_names_the_fraction() -> None:
    """A warm-up fraction of half the run or more is named as the fraction and the steps it resolves to."""
    [message] = warnings_of(OptimizerConfig(warmup_fraction=0.6), 100)
    assert "optim.warmup_fraction=0.6 (60 steps)" in message and "--model.optim.warmup_fraction" in message


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_a_run_of_unknown_length_does_not_decay_and_says_so(schedule: str) -> None:
    """With no step count (max_time or max_tokens alone) the rate holds after warm-up, with one warning."""
    cfg = OptimizerConfig(schedule=schedule, warmup_steps=10)
    assert [lr_factor(s, cfg, None) for s in (9, 10, 10**6)] == [1.0, 1.0, 1.0]
    [message] = warnings_of(cfg, None, "it ends by time")
    assert "unknown (it ends by time)" in message and schedule in message and "--trainer.max_steps" in message


def test_a_constant_schedule_of_unknown_length_is_quiet_but_a_fraction_is_not() -> None:
    """A constant rate needs no length; a warm-up fraction does (no warm-up, one warning)."""
    assert check_schedule(OptimizerConfig(schedule="constant", warmup_steps=10), None) == []
    cfg = OptimizerConfig(schedule="constant", warmup_fraction=0.1)
    [message] = warnings_of(cfg, None)
    assert "optim.warmup_fraction=0.1" in message and warmup_steps(cfg, None) == 0


@pytest.mark.parametrize(("total", "few"), [(1, True), (390, True), (FEW_STEPS - 1, True), (FEW_STEPS, False)])
def test_a_short_run_gets_one_info_line_naming_its_steps(total: int, few: bool) -> None:
    """Under FEW_STEPS optimizer steps, one INFO line gives the count, what set it and that max_steps sizes it."""
    notes = check_schedule(
        OptimizerConfig(warmup_steps=1), total, RunFit("--trainer.max_epochs 10 x 39 optimizer steps")
    )
    infos = [line for level, line in notes if level == logging.INFO]
    assert len(infos) == int(few)
    if few:
        assert f"{total} optimizer steps (--trainer.max_epochs 10" in infos[0] and "--trainer.max_steps" in infos[0]


def test_build_optimizer_logs_each_problem_once(caplog: pytest.LogCaptureFixture) -> None:
    """A short run whose warm-up does not fit: one warning and one info line, each logged once."""
    caplog.set_level(logging.INFO, logger="tetraformer.training.base.optim")
    build_optimizer(CausalLM(TransformerConfig.preset("tiny")), OptimizerConfig(warmup_steps=300), 390, 32)
    records = [r for r in caplog.records if r.name == "tetraformer.training.base.optim"]
    assert sorted(r.levelno for r in records) == [logging.INFO, logging.WARNING]
    assert len({r.getMessage() for r in records}) == 2


@pytest.mark.parametrize(("schedule", "lines"), [("cosine", 1), ("linear", 1), ("constant", 0)])
def test_a_time_or_token_limit_that_may_end_the_run_first_is_one_info_line(schedule: str, lines: int) -> None:
    """A decaying schedule that max_time or max_tokens may cut short says so once, naming both limits."""
    notes = check_schedule(OptimizerConfig(schedule=schedule), 5000, RunFit("--trainer.max_steps 5000", STOPS))
    infos = [line for level, line in notes if level == logging.INFO]
    assert len(infos) == lines and all(level == logging.INFO for level, _ in notes)
    if lines:
        assert infos[0].startswith("--trainer.max_time or --run.max_tokens may end this run before its 5000")


@pytest.mark.parametrize(("passes", "many"), [(None, False), (12.5, False), (MANY_PASSES, False), (2500.0, True)])
def test_a_run_that_reads_its_data_many_times_gets_one_info_line(passes: float | None, many: bool) -> None:
    """Over MANY_PASSES reads of the training data (a budget meant for more text), one INFO line says how many."""
    run = RunFit("--run.max_tokens 31,457,280 at 4,096 tokens an optimizer step", passes=passes)
    infos = [line for level, line in check_schedule(OptimizerConfig(), 7680, run) if level == logging.INFO]
    assert len(infos) == int(many)
    if many:
        assert "read its training data 2,500 times" in infos[0] and "--run.early_stopping_patience" in infos[0]
