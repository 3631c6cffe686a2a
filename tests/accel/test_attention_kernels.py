"""Attention kernels: every one that runs here computes the same attention and gradients; keys, memory, timing."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import Tensor
from torch.testing import assert_close

from tetraformer.accel import attention_kernels as kernels
from tetraformer.accel.attention_kernels import choice_key, fits, mask_kind, score_bytes, timed_calls
from tetraformer.core.attention import eager_attention
from tetraformer.core.masks import combine_masks

CPU_KERNELS = ("sdpa", "flash", "math", "eager")  # flash: SDPA's CPU flash kernel, where it takes the inputs
HELD = ("flash", "efficient", "cudnn")  # SDPA held to one of these raises where it cannot take the inputs
KERNEL_CASES = [*CPU_KERNELS, *(pytest.param(f"cuda:{name}", marks=pytest.mark.gpu) for name in kernels.KERNELS)]
MASKS = ("none", "causal", "bool", "bias")
SHAPES = {"square": (6, 6), "last-queries": (3, 7)}  # (T, S): T queries, the last T of S keys when causal
B, H, DH = 2, 3, 8
SCALE = DH**-0.5


def inputs(
    dtype: torch.dtype, t: int, s: int, kind: str, device: str = "cpu"
) -> tuple[list[Tensor], Tensor | None, bool]:
    """Leaf q (B, H, T, Dh), k, v (B, H, S, Dh) and the mask of a kind: a learned (1, H, T, S) bias, or a boolean
    key-padding mask (B, 1, T, S) with a short second row; and whether the call is causal."""
    q, k, v = (torch.randn(B, H, n, DH).to(device, dtype).requires_grad_() for n in (t, s, s))
    mask = None
    if kind == "bool":
        mask = combine_masks(torch.arange(s)[None] < torch.tensor([[s], [s - 2]]), False, t, s).to(device)
    elif kind == "bias":
        mask = torch.randn(1, H, t, s).to(device, dtype).requires_grad_()
    return [q, k, v], mask, kind == "causal"


def run(name: str, leaves: list[Tensor], mask: Tensor | None, causal: bool) -> list[Tensor]:
    """The kernel's output and the gradients of q, k, v (and a float mask) of a fixed random loss."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SDPA warns before it raises for a backend that cannot take the inputs
        y = kernels.KERNELS[name](*leaves, mask, causal, SCALE, 0.0)
    wrt = leaves + ([mask] if mask is not None and mask.is_floating_point() else [])
    grad = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(y.device, y.dtype)
    return [y, *torch.autograd.grad(y, wrt, grad)]


def reference(leaves: list[Tensor], mask: Tensor | None, causal: bool) -> list[Tensor]:
    """The core's eager reference in float64: output and gradients."""
    wide = [t.detach().double().requires_grad_() for t in leaves]
    bias = mask.detach().double().requires_grad_() if mask is not None and mask.is_floating_point() else mask
    y, _ = eager_attention(*wide, bias, causal, SCALE, 0.0)
    wrt = wide + ([bias] if bias is not None and bias.is_floating_point() else [])
    grad = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(y.device, leaves[0].dtype).double()
    return [y, *torch.autograd.grad(y, wrt, grad)]


def close(ours: Tensor, ref: Tensor) -> None:
    """fp32: float rounding; bf16: a few roundings of the largest value (inputs, scores and weights round)."""
    if ours.dtype == torch.float32:
        assert_close(ours.double(), ref, rtol=1e-5, atol=1e-5)
    else:
        assert_close(ours.double(), ref, rtol=2**-6, atol=2**-5 * ref.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("case", KERNEL_CASES)
def test_kernel_output_and_gradients_equal_the_float64_reference(
    case: str, kind: str, shape: str, dtype: torch.dtype
) -> None:
    """Output and the gradients of q, k, v and a learned bias equal float64 attention for every mask kind, with
    as many queries as keys or fewer (causal: the queries are the last keys); on a GPU, every kernel."""
    device, _, name = case.rpartition(":")
    leaves, mask, causal = inputs(dtype, *SHAPES[shape], kind, device or "cpu")
    try:
        ours = run(name, leaves, mask, causal)
    except RuntimeError:
        assert name in HELD, f"{name} refused the inputs"
        pytest.skip(f"SDPA's {name} kernel does not take these inputs here (on a CPU: a bias that needs a gradient)")
    for got, want in zip(ours, reference(leaves, mask, causal), strict=True):
        assert got.dtype == dtype
        close(got, want)


def test_mask_kinds() -> None:
    """A call masks by is_causal, a boolean mask, an additive bias, or not at all."""
    bias, padding = torch.zeros(1, 1, 2, 2), torch.ones(1, 1, 2, 2, dtype=torch.bool)
    assert [mask_kind(None, False), mask_kind(None, True), mask_kind(padding, False), mask_kind(bias, False)] == [
        "none",
        "causal",
        "bool",
        "bias",
    ]


def key(t: int = 6, s: int = 6, dtype: torch.dtype = torch.float32, kind: str = "none", **kw: object) -> str:
    """The choice key of a (2, 3, T, 8) call with S keys."""
    leaves, mask, causal = inputs(dtype, t, s, kind)
    args = {"dropout": 0.0, "training": False, **kw}
    return choice_key(leaves[0], leaves[1], mask, causal, args["dropout"], args["training"])


def test_choice_key_separates_what_a_choice_depends_on() -> None:
    """Pass, dropout, dtype, mask kind and query or key length bucket each give their own key; lengths within one
    power-of-two bucket share it."""
    base = key()
    others = [
        key(training=True),
        key(dropout=0.1),
        key(dtype=torch.bfloat16),
        key(kind="causal"),
        key(kind="bool"),
        key(kind="bias"),
        key(t=3),
        key(s=9),
        key(t=9, s=9),
    ]
    assert len({base, *others}) == 1 + len(others)
    assert key(t=5, s=7) == key(t=8, s=8)  # buckets 8 and 8


def test_score_bytes_grow_with_layers_in_training_only() -> None:
    """Training keeps every layer's weights for backward; inference needs one layer's scores at a time."""
    q, k = torch.zeros(2, 3, 16, 8), torch.zeros(2, 3, 32, 8)
    assert score_bytes(q, k, True, 4) > score_bytes(q, k, True, 1) > score_bytes(q, k, False, 1)
    assert score_bytes(q, k, False, 4) == score_bytes(q, k, False, 1)
    assert score_bytes(q, k, True, 2) - score_bytes(q, k, True, 1) == 2 * 3 * 16 * 32 * 4  # one fp32 (B, H, T, S)


def test_only_quadratic_kernels_need_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no budget, math and eager do not fit and SDPA's own kernels still do; with room, all fit."""
    q, k = torch.zeros(2, 3, 16, 8), torch.zeros(2, 3, 16, 8)
    monkeypatch.setattr(kernels, "budget", lambda device: 0)
    assert [n for n in kernels.KERNELS if fits(n, q, k, True, 2)] == ["sdpa", "flash", "efficient", "cudnn"]
    monkeypatch.setattr(kernels, "budget", lambda device: score_bytes(q, k, True, 2))
    assert all(fits(n, q, k, True, 2) for n in kernels.KERNELS)
    assert not fits("math", q, k, True, 3)


def test_budget_is_a_share_of_free_memory() -> None:
    """The budget is positive and at most the memory free now."""
    assert 0 < kernels.budget(torch.device("cpu")) <= kernels.free_memory(torch.device("cpu"))


@pytest.mark.parametrize("training", [False, True], ids=["infer", "train"])
def test_timed_calls_run_the_kernels_that_take_the_inputs(training: bool) -> None:
    """On a CPU the calls are every candidate that runs (never the CUDA-only backends), each runnable again; the
    caller's tensors get no gradient."""
    leaves, mask, causal = inputs(torch.float32, 6, 6, "bias")
    calls = timed_calls(list(kernels.KERNELS), leaves[0], leaves[1], mask, causal, SCALE, 0.1, training)
    assert set(kernels.CANDIDATES["cpu"]) <= set(calls) <= set(CPU_KERNELS)
    for call in calls.values():
        call()
    assert all(t.grad is None for t in [*leaves, mask])


@pytest.mark.parametrize("kind", MASKS)
def test_eager_gradients_of_a_fused_projection_keep_its_memory_order(kind: str) -> None:
    """q, k, v as the strided head views of one fused (B, T, 3 * H * Dh) projection: the eager kernel's output and
    the projection's gradient equal SDPA's math kernel's, and q, k and v's gradients come back in their views'
    memory order, so the split's backward joins whole rows."""
    t = 6
    fused = torch.randn(B, t, 3 * H * DH, dtype=torch.float64, requires_grad=True)
    _, mask, causal = inputs(torch.float64, t, t, kind)
    grads: list[Tensor] = []
    results = []
    for name in ("eager", "math"):
        q, k, v = (x.unflatten(-1, (H, DH)).transpose(1, 2) for x in fused.split(H * DH, dim=-1))
        if name == "eager":
            for x in (q, k, v):
                x.register_hook(grads.append)
        y = kernels.KERNELS[name](q, k, v, mask, causal, SCALE, 0.0)
        (gradient,) = torch.autograd.grad(y, fused, torch.ones_like(y))
        results.append((y, gradient))
    for ours, theirs in zip(*results, strict=True):
        assert_close(ours, theirs)
    assert len(grads) == 3 and all(g.transpose(1, 2).is_contiguous() for g in grads)  # (B, T, H, Dh) in memory
