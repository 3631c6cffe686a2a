"""The core Linear: plain nn.Linear outside bf16 on the CPU, the same math in every measured bf16 layout."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from tetraformer.core.linear import Linear
from tetraformer.core.packed import packed_linears


def test_plain_linear_outside_autocast() -> None:
    """Without autocast the output and gradients equal F.linear exactly."""
    layer = Linear(8, 5)
    x = torch.randn(3, 4, 8, requires_grad=True)
    layer(x).square().sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    F.linear(x_ref, layer.weight, layer.bias).square().sum().backward()
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))
    assert torch.equal(x.grad, x_ref.grad)


def test_bf16_path_matches_nn_linear() -> None:
    """Under CPU bf16 autocast: bf16 output and gradients (x, weight, bias) equal nn.Linear's within bf16 error."""
    layer, ref = Linear(64, 48), torch.nn.Linear(64, 48)
    ref.load_state_dict(layer.state_dict())
    x = torch.randn(2, 16, 64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    grad = torch.randn(2, 16, 48)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, y_ref = layer(x), ref(x_ref)
    assert y.dtype == y_ref.dtype == torch.bfloat16 and y.shape == y_ref.shape
    torch.testing.assert_close(y.float(), y_ref.float(), atol=0.05, rtol=0.02)
    y.float().backward(grad)
    y_ref.float().backward(grad)
    for ours, theirs in (
        (x.grad, x_ref.grad),
        (layer.weight.grad, ref.weight.grad),
        (layer.bias.grad, ref.bias.grad),
    ):
        torch.testing.assert_close(ours, theirs, atol=0.05 * theirs.abs().max().item(), rtol=0.02)


def test_same_state_dict_as_nn_linear() -> None:
    """Checkpoints and converters see an ordinary nn.Linear."""
    assert list(Linear(3, 2).state_dict()) == list(torch.nn.Linear(3, 2).state_dict())
    assert isinstance(Linear(3, 2), torch.nn.Linear)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
def test_packed_linears_give_the_same_values_and_only_without_gradients(prefer: Callable[[str], list[str]]) -> None:
    """Within packed_linears a Linear agrees with F.linear (packed weights, gradients off); outside, no copy stays."""
    prefer("packed")
    model = torch.nn.Sequential(Linear(16, 24), torch.nn.ReLU(), Linear(24, 8, bias=False))
    x = torch.randn(4, 3, 16)
    expected = model(x).detach()
    with packed_linears([model, model[2]], rows=4):  # a layer named twice is packed once
        with torch.no_grad():
            torch.testing.assert_close(model(x), expected)
        assert all(layer.packed is not None for layer in (model[0], model[2]))
        assert torch.equal(model(x), expected)  # gradients on: the plain path, as in training
    assert model[0].packed is None and model[2].packed is None


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
def test_packing_only_where_timed_faster(prefer: Callable[[str], list[str]]) -> None:
    """Where F.linear was timed faster for a weight shape, that layer is not packed; each shape is timed once."""
    keys = prefer("linear")
    model = torch.nn.Sequential(Linear(16, 24), Linear(16, 24), Linear(24, 8))
    with packed_linears([model], rows=3):
        assert all(layer.packed is None for layer in model)
    assert sorted(set(keys)) == ["packed 4x16x24 torch.float32", "packed 4x24x8 torch.float32"] and len(keys) == 4


def test_nothing_is_packed_under_fsdp(prefer: Callable[[str], list[str]]) -> None:
    """A module tree holding an FSDP unit keeps its plain weights: the unit's are whole only inside its forward."""

    class FullyShardedDataParallel(torch.nn.Module):  # stands in for torch's wrapper, found by class name
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

    prefer("packed")
    model = torch.nn.Sequential(Linear(16, 8), FullyShardedDataParallel(Linear(8, 8)))
    with packed_linears([model], rows=4):
        assert model[0].packed is None and model[1].inner.packed is None
