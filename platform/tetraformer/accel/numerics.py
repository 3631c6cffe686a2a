"""The kernel choices that change a run's numbers: fixed by a rule or by the user, never by timing; kept in checkpoints.

Two kernels that sum in another order give other last bits, and over a training run other weights. So timing
(`chooser.LayoutChooser`) only chooses among candidates whose results equal the default's bit for bit; where the
candidates differ, the choice is made here, by a rule or by the user's environment:

- attention kernel: `TETRAFORMER_ATTENTION` (`auto`: SDPA under its own dispatch, the stock path);
- bf16 CPU operand layouts: `TETRAFORMER_BF16_LAYOUT` (`auto`: `natural`, nn.Linear's own, where the CPU has
  native bf16 dot products; `transposed` (`A.T @ B`, 10-20x faster there) where it has not);
- LM loss: `TETRAFORMER_LM_LOSS` (`auto` and `logits`: the (N, V) logits then cross-entropy; `fused`: chunked
  logits with their gradients made in forward, accel/linear_cross_entropy.py).

A run's choices go into its checkpoints (`state`) and a resume takes them back (`restored`), so it computes as the
run it continues did, on this machine or another; an environment variable set on resume still wins, with a warning.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any

from tetraformer.accel.chooser import bf16_cpu_flag
from tetraformer.errors import ConfigError

log = logging.getLogger(__name__)

KERNELS = ("sdpa", "flash", "efficient", "cudnn", "math", "eager")  # attention_kernels.KERNELS' names
CHOICES: dict[str, tuple[str, ...]] = {
    "attention": ("auto", *KERNELS),
    "bf16_layout": ("auto", "natural", "transposed"),
    "lm_loss": ("auto", "logits", "fused"),
}
ENV = {"attention": "TETRAFORMER_ATTENTION", "bf16_layout": "TETRAFORMER_BF16_LAYOUT", "lm_loss": "TETRAFORMER_LM_LOSS"}


@dataclass(frozen=True)
class Numerics:
    """How a run computes where kernels differ in their last bits: the attention kernel (`auto` or one name), the
    bf16 CPU layout (`natural` or `transposed`) and the LM loss path (`logits` or `fused`)."""

    attention: str = "auto"
    bf16_layout: str = "natural"
    lm_loss: str = "logits"

    def __post_init__(self) -> None:
        """Refuse a value its setting does not take, naming the environment variable that sets it."""
        for field, allowed in CHOICES.items():
            value = getattr(self, field)
            if value not in allowed:
                raise ConfigError(f"{ENV[field]}={value}: must be one of {', '.join(allowed)}")

    def attention_kernel(self) -> str:
        """The attention kernel to run: the one named, or SDPA's own dispatch for `auto`."""
        return "sdpa" if self.attention == "auto" else self.attention

    def state(self) -> dict[str, str]:
        """Plain data for a checkpoint."""
        return dataclasses.asdict(self)


def native_bf16(flags: list[str] | None = None) -> bool:
    """Whether oneDNN runs bf16 dot products natively here: the CPU has them, no ONEDNN_MAX_CPU_ISA cap hides them."""
    return bf16_cpu_flag(flags) is not None


def from_env() -> Numerics:
    """This process's choices: each environment variable where set, else its rule."""
    values = {field: os.environ.get(ENV[field], "auto") for field in CHOICES}
    if values["bf16_layout"] == "auto":
        values["bf16_layout"] = "natural" if native_bf16() else "transposed"
    if values["lm_loss"] == "auto":
        values["lm_loss"] = "logits"
    return Numerics(**values)


def restored(saved: dict[str, Any] | None) -> Numerics:
    """The choices a checkpoint's run computed with (rules as they ruled then, wherever this runs), except where
    an environment variable set now names another: the user's word wins, with a warning; `from_env` without any."""
    if not saved:
        return from_env()
    values = {field: str(saved.get(field, getattr(Numerics(), field))) for field in CHOICES}
    for field, value in list(values.items()):
        asked = os.environ.get(ENV[field], "auto")
        if asked not in ("auto", value):
            log.warning(
                "%s=%s, where the checkpoint's run computed with %s: this run computes otherwise than that one did "
                "(a resume then differs from an uninterrupted run); unset it to compute as that run did",
                ENV[field],
                asked,
                value,
            )
            values[field] = asked
    return Numerics(**values)
