"""bf16 CPU matmul layouts: the fastest candidate is chosen, remembered per machine, and changes no result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tetraformer.core import linear as linear_module
from tetraformer.core import matmul_layout
from tetraformer.core.matmul_layout import (
    CANDIDATES,
    NATURAL,
    LayoutChooser,
    bucket,
    layout_calls,
    machine_key,
    matmul,
    operands,
    time_call,
)

SHAPE = (40, 24, 56)  # (M, N, K)


def fake_timer(fastest: dict[str, str], calls: list[tuple[str, str]] | None = None):
    """A timer that reports 1 ms for the `fastest` candidate of each product (the key's first word) and 5 ms for
    the rest, running nothing."""

    def timer(key: str, name: str, call: object, best: float) -> float:
        product = key.split()[0]
        if calls is not None:
            calls.append((product, name))
        return 1e-3 if name == fastest[product] else 5e-3

    return timer


def bf16_close(ours: torch.Tensor, ref: torch.Tensor) -> None:
    """Equal up to the last bf16 bit: kernels of different layouts may accumulate in a different order."""
    torch.testing.assert_close(ours.float(), ref.float(), rtol=2**-7, atol=2**-7 * ref.float().abs().max().item())


@pytest.mark.parametrize("product", list(NATURAL))
def test_chooses_the_faster_candidate(product: str, tmp_path: Path) -> None:
    """Whichever candidate the timer says is fastest is chosen, for every product."""
    for fastest in CANDIDATES[product]:
        chooser = LayoutChooser(fake_timer({product: fastest}), tmp_path / f"{fastest}.json")
        assert chooser.layout(product, SHAPE) == fastest


def test_natural_layout_kept_unless_clearly_slower(tmp_path: Path) -> None:
    """A re-laid candidate only 5% faster than the natural layout is not worth its copies."""

    def timer(key: str, name: str, call: object, best: float) -> float:
        return 1.0 if name == NATURAL[key.split()[0]] else 0.95

    assert LayoutChooser(timer, tmp_path / "l.json").layout("dx", SHAPE) == NATURAL["dx"]


def test_choices_persist_per_machine_and_shape_bucket(tmp_path: Path) -> None:
    """A choice is timed once, written to the file, and read back by a new process without timing again."""
    calls: list[tuple[str, str]] = []
    path = tmp_path / "layouts.json"
    chooser = LayoutChooser(fake_timer({"fwd": "cr"}, calls), path)
    assert chooser.layout("fwd", (1000, 24, 56)) == "cr"
    assert chooser.layout("fwd", (1024, 24, 56)) == "cr"  # same power-of-two bucket of rows: no new timing
    assert len(calls) == len(CANDIDATES["fwd"])
    assert json.loads(path.read_text()) == {machine_key(): {"fwd 1024x24x56": "cr"}}

    def never(*args: object) -> float:
        raise AssertionError("a cached shape was timed again")

    assert LayoutChooser(never, path).layout("fwd", (999, 24, 56)) == "cr"


def test_unreadable_cache_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A corrupt cache file is warned about and rewritten; it never stops a run."""
    path = tmp_path / "layouts.json"
    path.write_text("{not json")
    assert LayoutChooser(fake_timer({"dx": "rc"}), path).layout("dx", SHAPE) == "rc"
    assert "ignoring the bf16 layout cache" in caplog.text
    assert json.loads(path.read_text())[machine_key()] == {"dx 64x24x56": "rc"}


def test_forced_modes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """TETRAFORMER_BF16_LAYOUT=natural|transposed skips the timing; anything else is refused."""
    chooser = LayoutChooser(fake_timer({"fwd": "cr"}), tmp_path / "l.json")
    monkeypatch.setenv("TETRAFORMER_BF16_LAYOUT", "natural")
    assert chooser.layout("fwd", SHAPE) == NATURAL["fwd"]
    monkeypatch.setenv("TETRAFORMER_BF16_LAYOUT", "transposed")
    assert chooser.layout("dx", SHAPE) == "cr"
    monkeypatch.setenv("TETRAFORMER_BF16_LAYOUT", "fast")
    with pytest.raises(ValueError, match="TETRAFORMER_BF16_LAYOUT"):
        chooser.layout("fwd", SHAPE)


@pytest.mark.parametrize("product", list(NATURAL))
def test_every_layout_computes_the_same_product(product: str) -> None:
    """Each candidate layout gives the natural layout's product (bit-exact on this small shape's kernels or
    within one bf16 rounding), and the real timer returns a positive time."""
    a, b = operands(product, SHAPE)
    for layout in ("rr", "rc", "cr", "cc"):
        bf16_close(matmul(a, b, layout), a @ b)
    assert all(time_call("k", name, call, float("inf")) > 0 for name, call in layout_calls(product, SHAPE).items())


def forward_backward(x: torch.Tensor, layer: torch.nn.Linear, use_core: bool) -> list[torch.Tensor]:
    """Output and (x, weight, bias) gradients under CPU bf16 autocast, through the core linear or F.linear."""
    x = x.detach().clone().requires_grad_()
    layer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = (linear_module.linear if use_core else F.linear)(x, layer.weight, layer.bias)
    y.float().square().sum().backward()
    return [y, x.grad, layer.weight.grad, layer.bias.grad]


@pytest.mark.parametrize("pick", ["natural", "transposed", "mixed"])
def test_linear_gives_the_same_results_in_any_plan(pick: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Whatever the timer picks, the core Linear's output and gradients equal nn.Linear's under bf16 autocast."""
    fastest = {
        "natural": NATURAL,
        "transposed": dict.fromkeys(NATURAL, "cr"),
        "mixed": {"fwd": "cr", "dx": "rc", "dw": "rc"},
    }[pick]
    monkeypatch.setattr(matmul_layout, "CHOOSER", LayoutChooser(fake_timer(fastest), tmp_path / "l.json"))
    layer, x = torch.nn.Linear(24, 56), torch.randn(4, 10, 24)
    assert linear_module.layout_plan(x.reshape(-1, 24).requires_grad_(), layer.weight) == fastest
    for ours, ref in zip(forward_backward(x, layer, True), forward_backward(x, layer, False), strict=True):
        assert ours.dtype == ref.dtype and ours.shape == ref.shape
        bf16_close(ours, ref)


def test_inference_times_only_the_forward(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Under no_grad only the forward product is timed; fp32 never asks the chooser."""
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(matmul_layout, "CHOOSER", LayoutChooser(fake_timer(NATURAL, calls), tmp_path / "l.json"))
    layer = torch.nn.Linear(24, 56)
    linear_module.linear(torch.randn(5, 24), layer.weight, layer.bias)
    assert calls == []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        linear_module.linear(torch.randn(5, 24), layer.weight, layer.bias)
    assert {product for product, _ in calls} == {"fwd"}


def test_bucket_rounds_rows_up_to_a_power_of_two() -> None:
    """Row counts share a timing with every count up to the next power of two."""
    assert [bucket(m) for m in (1, 2, 3, 1000, 1024, 1025)] == [1, 2, 4, 1024, 1024, 2048]


def test_bf16_weights_without_autocast_take_the_chosen_layout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """bf16-true (bf16 weights and inputs, no autocast) is a bf16 CPU matmul too: laid out as chosen, same result."""
    calls: list[tuple[str, str]] = []
    fastest = dict.fromkeys(NATURAL, "cr")
    monkeypatch.setattr(matmul_layout, "CHOOSER", LayoutChooser(fake_timer(fastest, calls), tmp_path / "l.json"))
    layer = torch.nn.Linear(24, 56).to(torch.bfloat16)
    x = torch.randn(3, 7, 24, dtype=torch.bfloat16)
    y = linear_module.linear(x, layer.weight, layer.bias)
    assert {product for product, _ in calls} == set(NATURAL) and y.dtype == torch.bfloat16
    bf16_close(y, F.linear(x, layer.weight, layer.bias))
