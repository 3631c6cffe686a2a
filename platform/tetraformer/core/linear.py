"""nn.Linear with a faster bf16 path on CPUs: every matmul in the layout oneDNN's bf16 kernels favour.

On CPUs without native bf16 matrix units, oneDNN runs `A.T @ B` (A, B row-major) several times faster
than the `x @ W.T` and `grad @ W` that nn.Linear issues (measured on AVX2: 21-24 vs 1-7 GFLOP/s). Under
CPU bf16 autocast, `Linear` transposes its operands once so forward and both backward products use
that layout; the math is the same. Everywhere else it is plain nn.Linear.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class _TransposedBF16Linear(torch.autograd.Function):
    """y = x W^T + b, computed as (x^T)^T (W^T) so each matmul is `A.T @ B`."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """(M, N) x (K, N) -> (M, K)."""
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        y = x.t().contiguous().t() @ weight.t().contiguous()  # (M, K)
        return y + bias if bias is not None else y

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Gradients of x (M, N), weight (K, N) and bias (K,)."""
        x, weight = ctx.saved_tensors
        grad_x = grad.t().contiguous().t() @ weight  # (M, N)
        grad_w = grad.t() @ x  # (K, N)
        return grad_x, grad_w, grad.sum(0) if ctx.has_bias else None


def cpu_bf16_autocast(x: Tensor) -> bool:
    """True when x runs on the CPU under bf16 autocast."""
    return (
        x.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """F.linear, through the transposed bf16 path under CPU bf16 autocast."""
    if not cpu_bf16_autocast(x):
        return F.linear(x, weight, bias)
    lead = x.shape[:-1]
    cast = [
        t.to(torch.bfloat16) if t is not None else None for t in (x.reshape(-1, x.shape[-1]), weight, bias)
    ]
    with torch.autocast("cpu", enabled=False):
        y = _TransposedBF16Linear.apply(*cast)  # (M, K)
    return y.reshape(*lead, weight.shape[0])


class Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) with the CPU bf16 fast path."""

    packed: Tensor | None = None  # oneDNN-packed weight, set only within core.packed.packed_linears

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        if self.packed is not None and not torch.is_grad_enabled():
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        return linear(x, self.weight, self.bias)
