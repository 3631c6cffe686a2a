"""LayoutLinear: plain nn.Linear outside bf16 on the CPU, the same math in every measured bf16 layout, swapped into
a network in place."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.accel.fakes import bf16_close, fake_timer, pretend_exact
from tetraformer.accel import bf16_layouts, chooser, use_bf16_layouts
from tetraformer.accel.bf16_linear import LayoutLinear, layout_plan, linear
from tetraformer.accel.chooser import NATURAL, LayoutChooser
from tetraformer.core import CausalLM, TransformerConfig


def test_plain_linear_outside_autocast() -> None:
    """Without autocast the output and gradients equal F.linear exactly."""
    layer = LayoutLinear(8, 5)
    x = torch.randn(3, 4, 8, requires_grad=True)
    layer(x).square().sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    F.linear(x_ref, layer.weight, layer.bias).square().sum().backward()
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))
    assert torch.equal(x.grad, x_ref.grad)


def test_bf16_path_matches_nn_linear() -> None:
    """Under CPU bf16 autocast: bf16 output and gradients (x, weight, bias) equal nn.Linear's within bf16 error."""
    layer, ref = LayoutLinear(64, 48), nn.Linear(64, 48)
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


def test_swapping_keeps_parameters_and_state_dict_keys() -> None:
    """use_bf16_layouts turns every stock nn.Linear of a built network into a LayoutLinear in place: the same
    Parameter objects (tied ones stay tied), the same state-dict keys; bf16_layouts gives stock ones back on exit."""
    net = CausalLM(TransformerConfig.preset("tiny", d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=100))
    params, keys = list(net.parameters()), list(net.state_dict())
    with bf16_layouts(net):
        linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
        assert linears and all(type(m) is LayoutLinear for m in linears)
        assert list(net.parameters()) == params and list(net.state_dict()) == keys
        assert net.lm_head.proj.weight is net.embed.tokens.weight
    assert all(type(m) is nn.Linear for m in linears)
    assert use_bf16_layouts(net, "transposed") == linears  # again: the same layers, in the mode asked for
    assert {m.layout_mode for m in use_bf16_layouts(net, "natural")} == {"natural"}


def forward_backward(x: torch.Tensor, layer: nn.Linear, use_layouts: bool) -> list[torch.Tensor]:
    """Output and (x, weight, bias) gradients under CPU bf16 autocast, through the layout linear or F.linear."""
    x = x.detach().clone().requires_grad_()
    layer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = (linear if use_layouts else F.linear)(x, layer.weight, layer.bias)
    y.float().square().sum().backward()
    return [y, x.grad, layer.weight.grad, layer.bias.grad]


@pytest.mark.parametrize("pick", ["natural", "transposed", "mixed"])
def test_linear_gives_the_same_results_in_any_plan(pick: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Whatever the timer picks, the layout linear's output and gradients equal nn.Linear's under bf16 autocast."""
    fastest = {
        "natural": NATURAL,
        "transposed": dict.fromkeys(NATURAL, "cr"),
        "mixed": {"fwd": "cr", "dx": "rc", "dw": "rc"},
    }[pick]
    monkeypatch.setattr(
        chooser, "CHOOSER", LayoutChooser(fake_timer(fastest), tmp_path / "l.json", exact=pretend_exact)
    )
    layer, x = nn.Linear(24, 56), torch.randn(4, 10, 24)
    assert layout_plan(x.reshape(-1, 24).requires_grad_(), layer.weight) == fastest
    for ours, ref in zip(forward_backward(x, layer, True), forward_backward(x, layer, False), strict=True):
        assert ours.dtype == ref.dtype and ours.shape == ref.shape
        bf16_close(ours, ref)


def test_inference_times_only_the_forward(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Under no_grad only the forward product is timed; fp32 never asks the chooser."""
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(
        chooser, "CHOOSER", LayoutChooser(fake_timer(NATURAL, calls), tmp_path / "l.json", exact=pretend_exact)
    )
    layer = nn.Linear(24, 56)
    linear(torch.randn(5, 24), layer.weight, layer.bias)
    assert calls == []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        linear(torch.randn(5, 24), layer.weight, layer.bias)
    assert {product for product, _ in calls} == {"fwd"}


def test_bf16_weights_without_autocast_take_the_chosen_layout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """bf16-true (bf16 weights and inputs, no autocast) is a bf16 CPU matmul too: laid out as chosen, same result."""
    calls: list[tuple[str, str]] = []
    fastest = dict.fromkeys(NATURAL, "cr")
    monkeypatch.setattr(
        chooser, "CHOOSER", LayoutChooser(fake_timer(fastest, calls), tmp_path / "l.json", exact=pretend_exact)
    )
    layer = nn.Linear(24, 56).to(torch.bfloat16)
    x = torch.randn(3, 7, 24, dtype=torch.bfloat16)
    y = linear(x, layer.weight, layer.bias)
    assert {product for product, _ in calls} == set(NATURAL) and y.dtype == torch.bfloat16
    bf16_close(y, F.linear(x, layer.weight, layer.bias))
