"""nn.Linear whose bf16 CPU matmuls run in the operand layout this machine's kernels are fastest in.

`use_bf16_layouts` turns a built network's stock nn.Linear layers into `LayoutLinear` in place (same parameters
and state-dict keys), in a layout mode (accel/numerics.py: `transposed` where the CPU lacks native bf16, else
`natural`). On the CPU in bf16 (autocast or bf16 weights) each of its three products (forward, input gradient,
weight gradient) runs in `transposed` mode's `A.T @ B`, or in `natural` mode in the layout `chooser.CHOOSER`
timed fastest for its shape among those that give nn.Linear's result bit for bit. Where every product's pick is
the layout nn.Linear uses anyway, the call is plain F.linear, as it is outside bf16 on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.accel import chooser
from tetraformer.accel.chooser import NATURAL, matmul
from tetraformer.accel.numerics import from_env


class _LaidOutLinear(torch.autograd.Function):
    """y = x W^T + b with each product in a chosen operand layout."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, plan: dict[str, str]) -> Tensor:
        """(M, N) x (K, N) -> (M, K)."""
        ctx.save_for_backward(x, weight)
        ctx.plan, ctx.has_bias = plan, bias is not None
        return matmul(x, weight.t(), plan["fwd"], bias)  # (M, K)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        """Gradients of x (M, N), weight (K, N) and bias (K,)."""
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b, _ = ctx.needs_input_grad
        grad_x = matmul(grad, weight, ctx.plan["dx"]) if need_x else None  # (M, N)
        grad_w = matmul(grad.t(), x, ctx.plan["dw"]) if need_w else None  # (K, N)
        grad_b = grad.sum(0) if need_b and ctx.has_bias else None  # (K,)
        return grad_x, grad_w, grad_b, None


def cpu_bf16(x: Tensor, weight: Tensor) -> bool:
    """True when this Linear's matmuls run on the CPU in bf16: under bf16 autocast, or on bf16 tensors."""
    if x.device.type != "cpu" or torch.compiler.is_compiling():
        return False
    autocast = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    return autocast or (x.dtype == weight.dtype == torch.bfloat16)


def layout_plan(x: Tensor, weight: Tensor, mode: str = "natural") -> dict[str, str]:
    """Each product's layout for x (M, N) and weight (K, N) in a layout mode; only the forward's when no gradient
    is needed."""
    shape = (x.shape[0], weight.shape[1], weight.shape[0])
    grad = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    return {p: chooser.CHOOSER.layout(p, shape, mode) if grad or p == "fwd" else NATURAL[p] for p in NATURAL}


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, mode: str = "natural") -> Tensor:
    """F.linear, with bf16 CPU matmuls in the layout mode's layouts (`natural`: the fastest of those exact here)."""
    if not cpu_bf16(x, weight):
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])  # (M, N)
    plan = layout_plan(flat, weight, mode)
    if plan == NATURAL:
        return F.linear(x, weight, bias)
    cast = [t.to(torch.bfloat16) if t is not None else None for t in (flat, weight, bias)]
    with torch.autocast("cpu", enabled=False):
        y = _LaidOutLinear.apply(*cast, plan)  # (M, K)
    return y.reshape(*x.shape[:-1], weight.shape[0])


class LayoutLinear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) with the bf16 CPU layouts of its layout mode."""

    layout_mode: str = "natural"  # accel/numerics.py's bf16_layout, set by use_bf16_layouts

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        return linear(x, self.weight, self.bias, self.layout_mode)


def use_bf16_layouts(net: nn.Module, mode: str | None = None) -> list[nn.Linear]:
    """Make every stock nn.Linear of `net` (and every LayoutLinear) a LayoutLinear in the layout mode (None: this
    process's, `numerics.from_env`) in place, its parameters untouched; returns them."""
    mode = mode or from_env().bf16_layout
    layers = [m for m in net.modules() if type(m) in (nn.Linear, LayoutLinear)]
    for layer in layers:
        layer.__class__ = LayoutLinear
        layer.layout_mode = mode
    return layers


@contextmanager
def bf16_layouts(net: nn.Module, mode: str | None = None) -> Iterator[None]:
    """Within, `net`'s stock nn.Linear layers are LayoutLinear in the layout mode; stock again on exit."""
    layers = use_bf16_layouts(net, mode)
    try:
        yield
    finally:
        for layer in layers:
            layer.__class__ = nn.Linear
            del layer.layout_mode
