"""oneDNN-packed weight copies for fp32 CPU decoding: a step multiplies a few rows by every weight.

At 4-32 rows oneDNN's packed-weight kernel ran those products ~2x faster than the MKL kernel F.linear
calls on the AVX-512 machine this was found on (MKL 2024.2 / oneDNN 3.12), and slower on tiny layers, so
each weight shape is timed both ways on the machine that runs (`chooser.CHOOSER`, cached per machine), where
both give F.linear's result bit for bit on the probes; else F.linear runs (a decoded token never depends on a timing).
`packed_linears` makes the Linear layers where packing won `PackedLinear` on entry, and gives them back their
own class (and drops the copies) on exit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.accel import chooser
from tetraformer.accel.bf16_linear import LayoutLinear

PLAIN_LINEARS = (nn.Linear, LayoutLinear)  # classes whose forward is F.linear in fp32: a packed copy may stand in


class PackedLinear(nn.Linear):
    """nn.Linear that multiplies by a oneDNN-packed copy of its weight while gradients are off."""

    packed: Tensor  # set by packed_linears

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        if torch.is_grad_enabled():
            return F.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


@contextmanager
def packed_linears(modules: list[nn.Module], rows: int) -> Iterator[None]:
    """Within (gradients off), the modules' fp32 CPU Linear layers multiply by oneDNN-packed weight copies
    where that was timed faster here.

    For decoding, whose steps multiply a few rows (`rows`, the packing hint) by every weight.
    The copies cost one pass over the weights on entry and the weights' size in memory until exit.
    Nothing is packed under FSDP, whose units gather their weights only inside their forward.
    """
    found = {id(m): m for module in modules for m in module.modules() if _packable(m)}
    usable = _onednn() and not _sharded(modules)
    layers = [(m, type(m)) for m in found.values() if packed_faster(m, rows)] if usable else []
    try:
        for layer, _ in layers:
            layer.packed = torch.ops.mkldnn._reorder_linear_weight(layer.weight.detach(), rows)
            layer.__class__ = PackedLinear
        yield
    finally:
        for layer, cls in layers:
            layer.__class__ = cls
            del layer.packed


def packed_faster(layer: nn.Linear, rows: int) -> bool:
    """Whether `rows` rows times this layer's packed weight beat F.linear here (timed once per shape)."""
    w = layer.weight.detach()
    out_features, in_features = w.shape

    def calls() -> dict[str, Callable[[], object]]:
        x, packed = chooser.probe(rows, in_features), torch.ops.mkldnn._reorder_linear_weight(w, rows)
        pointwise = torch.ops.mkldnn._linear_pointwise
        return {
            "linear": partial(F.linear, x, w, layer.bias),
            "packed": partial(pointwise, x, packed, layer.bias, "none", [], ""),
        }

    key = f"packed {chooser.bucket(rows)}x{in_features}x{out_features} {w.dtype}"
    return chooser.CHOOSER.pick(key, "linear", calls) == "packed"


def _packable(module: nn.Module) -> bool:
    """A plain Linear with a plain fp32 CPU weight (no tensor subclass such as a DTensor), outside autocast (which
    packing would bypass)."""
    if type(module) not in PLAIN_LINEARS:
        return False
    weight = module.weight
    plain = type(weight.data) is torch.Tensor and weight.device.type == "cpu" and weight.dtype == torch.float32
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
