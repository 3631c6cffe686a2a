"""nn.Linear with a faster bf16 path on CPUs: every matmul in the layout oneDNN's bf16 kernels favour.

On CPUs without native bf16 matrix units, oneDNN runs `A.T @ B` (A, B row-major) several times faster
than the `x @ W.T` and `grad @ W` that nn.Linear issues (measured on AVX2: 21-24 vs 1-7 GFLOP/s). Under
CPU bf16 autocast, `Linear` transposes its operands once so forward and both backward products use
that layout; the math is the same. Within `packed_linears` (fp32 CPU decoding) it multiplies by
oneDNN-packed weight copies. Everywhere else it is plain nn.Linear.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
    """nn.Linear (same parameters and state-dict keys) with the CPU bf16 fast path, and a packed-weight
    path for fp32 CPU decoding (see `packed_linears`)."""

    packed: Tensor | None = None  # a oneDNN-packed copy of the weight, set only within packed_linears

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        if self.packed is not None and not torch.is_grad_enabled():
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        return linear(x, self.weight, self.bias)


@contextmanager
def packed_linears(modules: list[nn.Module], rows: int) -> Iterator[None]:
    """Within (gradients off), the modules' fp32 CPU Linear layers multiply by oneDNN-packed weight copies.

    For decoding, whose steps multiply a few rows (`rows`, the packing hint) by every weight: oneDNN's
    packed kernel runs those products ~2x faster than F.linear's MKL one at 4-32 rows (measured on
    AVX-512). The copies cost one pass over the weights on entry and the weights' size in memory until exit.
    Nothing is packed under FSDP, whose units gather their weights only inside their forward.
    """
    found = {
        id(m): m for module in modules for m in module.modules() if type(m) is Linear and _packable(m.weight)
    }
    layers = list(found.values()) if _onednn() and not _sharded(modules) else []
    try:
        for layer in layers:
            layer.packed = torch.ops.mkldnn._reorder_linear_weight(layer.weight.detach(), rows)
        yield
    finally:
        for layer in layers:
            layer.packed = None


def _packable(weight: Tensor) -> bool:
    """A plain fp32 CPU weight (no tensor subclass such as a DTensor), outside autocast (which packing would bypass)."""
    plain = (
        type(weight.data) is torch.Tensor and weight.device.type == "cpu" and weight.dtype == torch.float32
    )
    return plain and not torch.is_autocast_enabled("cpu")


def _sharded(modules: list[nn.Module]) -> bool:
    """Whether FSDP manages any of the modules: its units hold whole weights only inside their own forward."""
    names = {"FullyShardedDataParallel", "FSDPModule"}
    return any(c.__name__ in names for module in modules for m in module.modules() for c in type(m).__mro__)


def _onednn() -> bool:
    """Whether this torch build has oneDNN's packed linear ops."""
    try:
        return torch.backends.mkldnn.is_available() and callable(torch.ops.mkldnn._linear_pointwise)
    except (AttributeError, RuntimeError):
        return False
