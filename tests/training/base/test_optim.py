"""AdamW parameter groups and learning-rate schedules."""

from __future__ import annotations

import math

import pytest

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.training.base.optim import OptimizerConfig, build_optimizer, check_schedule, lr_factor, param_groups


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


@pytest.mark.parametrize(
    ("warmup", "total", "says"),
    [(50, 40, "never reaches optim.lr"), (300, 390, "peaks late"), (20, 40, "peaks late")],
)
def test_a_warmup_that_does_not_fit_the_run_is_named(warmup: int, total: int, says: str) -> None:
    """A warm-up of half the optimizer steps or more gets one warning naming the option, its share and the fix."""
    message = check_schedule(OptimizerConfig(warmup_steps=warmup), total)
    assert message is not None and says in message
    assert f"optim.warmup_steps={warmup}" in message and f"{total} optimizer steps" in message


@pytest.mark.parametrize(("warmup", "total", "schedule"), [(0, 10, "cosine"), (19, 40, "linear"), (4000, 100, "noam")])
def test_a_warmup_that_fits_or_a_noam_schedule_is_quiet(warmup: int, total: int, schedule: str) -> None:
    """No warning when the warm-up is under half the run, absent, or noam's (its warm-up sets the peak's step)."""
    assert check_schedule(OptimizerConfig(warmup_steps=warmup, schedule=schedule), total) is None
