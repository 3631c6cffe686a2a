"""A transposed copy of the LM head's weight for one-row decoding steps, where it was timed faster here.

The vocabulary projection is a decoding step's largest matmul. At one row, `x @ W^T` through a (D, V) contiguous
copy streamed the weight ~3x faster than F.linear's one-row kernel on the AVX-512 machine this was found on, so
each weight shape is timed both ways on the machine that runs (`chooser.CHOOSER`, cached per machine), where
both give F.linear's result bit for bit on the probes; else F.linear runs (a decoded token never depends on a timing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.accel import chooser
from tetraformer.accel.packed import PLAIN_LINEARS


class RowLinear(nn.Linear):
    """Bias-free nn.Linear that multiplies one row by a (in, out) transposed copy of its weight, gradients off."""

    row_weight: Tensor  # (D, V), set by one_row_projection

    def forward(self, x: Tensor) -> Tensor:
        """(..., D) -> (..., V)."""
        if x.numel() == x.shape[-1] and not torch.is_grad_enabled():
            return x @ self.row_weight  # (1, D) @ (D, V)
        return F.linear(x, self.weight)


@contextmanager
def one_row_projection(proj: nn.Module) -> Iterator[None]:
    """Within, a one-row input to the projection goes through a (D, V) transposed copy of its weight, made on
    entry, where that was timed faster here. Anything else (GPU, autocast, a bias, a tensor-subclass weight, a
    Linear subclass with its own forward) keeps F.linear."""
    if not plain_cpu_projection(proj) or not transposed_row_faster(proj.weight):
        yield
        return
    cls = type(proj)
    proj.row_weight = proj.weight.detach().t().contiguous()  # (D, V)
    proj.__class__ = RowLinear
    try:
        yield
    finally:
        proj.__class__ = cls
        del proj.row_weight


def transposed_row_faster(weight: Tensor) -> bool:
    """Whether one row times the (D, V) transposed copy of this (V, D) weight beats F.linear here (timed once)."""
    w = weight.detach()
    v, d = w.shape

    def calls() -> dict[str, Callable[[], object]]:
        x, w_t = chooser.probe(1, d, dtype=w.dtype), w.t().contiguous()  # (1, D), (D, V)
        return {"linear": partial(F.linear, x, w), "rows": partial(torch.matmul, x, w_t)}

    return chooser.CHOOSER.pick(f"row 1x{d}x{v} {w.dtype}", "linear", calls) == "rows"


def plain_cpu_projection(proj: nn.Module) -> bool:
    """Whether a projection is a plain, bias-free Linear with a CPU weight Parameter, outside autocast."""
    if type(proj) not in PLAIN_LINEARS or proj.bias is not None or type(proj.weight) is not nn.Parameter:
        return False
    return proj.weight.device.type == "cpu" and not torch.is_autocast_enabled("cpu")
