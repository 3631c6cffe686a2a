"""oneDNN-packed decoding weights: the same values as F.linear, only without gradients, only where timed faster."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from tetraformer.accel.bf16_linear import LayoutLinear
from tetraformer.accel.chooser import ROUNDS
from tetraformer.accel.packed import PackedLinear, packed_linears

ONEDNN = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")


@ONEDNN
def test_packed_linears_give_the_same_values_and_only_without_gradients(prefer: Callable[[str], list[str]]) -> None:
    """Within packed_linears a Linear agrees with F.linear (packed weights, gradients off); on exit every layer has
    its own class back and no copy stays."""
    prefer("packed")
    model = nn.Sequential(nn.Linear(16, 24), nn.ReLU(), LayoutLinear(24, 8, bias=False))
    x = torch.randn(4, 3, 16)
    expected = model(x).detach()
    with packed_linears([model, model[2]], rows=4):  # a layer named twice is packed once
        with torch.no_grad():
            torch.testing.assert_close(model(x), expected)
        assert type(model[0]) is type(model[2]) is PackedLinear
        assert torch.equal(model(x), expected)  # gradients on: the plain path, as in training
    assert type(model[0]) is nn.Linear and type(model[2]) is LayoutLinear
    assert not hasattr(model[0], "packed") and not hasattr(model[2], "packed")


@ONEDNN
def test_packing_only_where_timed_faster(prefer: Callable[[str], list[str]]) -> None:
    """Where F.linear was timed faster for a weight shape, that layer is not packed; each shape is timed once."""
    keys = prefer("linear")
    model = nn.Sequential(nn.Linear(16, 24), nn.Linear(16, 24), nn.Linear(24, 8))
    with packed_linears([model], rows=3):
        assert all(type(layer) is nn.Linear for layer in model)
    assert (
        sorted(set(keys)) == ["packed 4x16x24 torch.float32", "packed 4x24x8 torch.float32"] and len(keys) == 4 * ROUNDS
    )


def test_nothing_is_packed_under_fsdp_autocast_or_other_linears(prefer: Callable[[str], list[str]]) -> None:
    """A module tree holding an FSDP unit keeps its plain weights (the unit's are whole only inside its forward);
    autocast, which packing would bypass, packs nothing; nor does a Linear subclass with its own forward."""

    class FullyShardedDataParallel(nn.Module):  # stands in for torch's wrapper, found by class name
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

    class Scaled(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return 2 * super().forward(x)

    prefer("packed")
    sharded = nn.Sequential(nn.Linear(16, 8), FullyShardedDataParallel(nn.Linear(8, 8)))
    with packed_linears([sharded], rows=4):
        assert type(sharded[0]) is type(sharded[1].inner) is nn.Linear
    plain, other = nn.Linear(16, 8), Scaled(16, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16), packed_linears([plain], rows=4):
        assert type(plain) is nn.Linear
    with packed_linears([other], rows=4):
        assert type(other) is Scaled
