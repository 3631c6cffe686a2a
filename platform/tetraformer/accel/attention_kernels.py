"""The attention kernels accel chooses among, what each needs in memory, and how one is timed.

Every kernel computes softmax(q k^T * scale + mask) v for (B, H, T, Dh) queries and (B, H, S, Dh) keys and values
(grouped-query heads already repeated): SDPA under its own dispatch ("sdpa", the default), SDPA held to one
backend ("flash", "efficient", "cudnn", "math"), and "eager", two batched matmuls around a softmax in the
inputs' dtype. The math and eager kernels hold the (B, H, T, S) scores, so they are only eligible where those
fit the memory budget; the flash-type kernels work in O(T) memory.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from tetraformer.accel.batched_attention import batched_attention
from tetraformer.accel.chooser import bucket, own_saved_tensors, probe

Kernel = Callable[[Tensor, Tensor, Tensor, "Tensor | None", bool, float, float], Tensor]
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}
CANDIDATES = {  # per device type; on a CPU, SDPA's own pick is its flash kernel (math when dropout is on)
    "cpu": ("sdpa", "math", "eager"),
    "cuda": ("sdpa", "flash", "efficient", "cudnn", "math", "eager"),
}
QUADRATIC = frozenset({"math", "eager"})  # kernels that hold the (B, H, T, S) scores
BUDGET_SHARE = 0.5  # of the memory free when first asked, that the scores of every layer may take


def sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, scale: float, dropout: float) -> Tensor:
    """SDPA under its own backend choice: (B, H, T, Dh) -> (B, H, T, Dh). Causal with fewer queries than keys
    gets the eager kernel's mask (queries are the last keys): SDPA's is_causal would align them with the first."""
    if causal and q.shape[-2] != k.shape[-2]:
        mask, causal = ~future(q.shape[-2], k.shape[-2], q.device), False
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=causal, scale=scale)


def sdpa_backend(name: str) -> Kernel:
    """SDPA held to one backend (it raises where that backend cannot take the inputs)."""

    def kernel(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, scale: float, p: float) -> Tensor:
        with sdpa_kernel(BACKENDS[name]):
            return sdpa(q, k, v, mask, causal, scale, p)

    return kernel


@functools.lru_cache(maxsize=64)
def future(t: int, s: int, device: torch.device) -> Tensor:
    """(T, S) "may not attend" mask of causal attention whose T queries are the last of S keys."""
    return torch.ones(t, s, dtype=torch.bool, device=device).triu(s - t + 1)


def eager(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, scale: float, dropout: float) -> Tensor:
    """Batched matmuls and a softmax, all in the inputs' dtype (its softmax accumulates in fp32): (B, H, T, Dh).
    Without dropout, accel.batched_attention's own backward (gradients in the inputs' memory order); with it,
    autograd's over the same ops."""
    boolean = mask is not None and mask.dtype == torch.bool
    blocked = future(q.shape[-2], k.shape[-2], q.device) if causal else ~mask if boolean else None
    bias = None if causal or boolean else mask
    if dropout == 0:
        return batched_attention(q, k, v, blocked, bias, scale)
    with torch.autocast(q.device.type, enabled=False):
        scores = (q * scale) @ k.transpose(-2, -1)  # (B, H, T, S)
        if blocked is not None:
            scores = scores.masked_fill(blocked, float("-inf"))
        elif bias is not None:
            scores = scores + bias.to(scores.dtype)
        return F.dropout(scores.softmax(dim=-1), dropout) @ v.to(scores.dtype)


KERNELS: dict[str, Kernel] = {"sdpa": sdpa, "eager": eager, **{name: sdpa_backend(name) for name in BACKENDS}}


def mask_kind(mask: Tensor | None, causal: bool) -> str:
    """How the call masks: by is_causal alone, a boolean mask, an additive bias, or not at all."""
    if mask is None:
        return "causal" if causal else "none"
    return "bool" if mask.dtype == torch.bool else "bias"


def choice_key(q: Tensor, k: Tensor, mask: Tensor | None, causal: bool, dropout: float, training: bool) -> str:
    """What a choice depends on: pass, device, dtype, head width, query and key length buckets, B*H bucket, mask."""
    b, h, t, d = q.shape
    mode = "train" if training else "infer"
    drop = " dropout" if dropout > 0 else ""
    dtype = str(q.dtype).removeprefix("torch.")
    return f"attn {mode} {q.device.type} {dtype} d{d} q{bucket(t)} k{bucket(k.shape[-2])} bh{bucket(b * h)} " + (
        mask_kind(mask, causal) + drop
    )


def score_bytes(q: Tensor, k: Tensor, training: bool, layers: int) -> int:
    """Memory a quadratic kernel needs for (B, H, T, Dh) queries and S keys: the weights every layer keeps for
    backward, and a few fp32 score tensors."""
    b, h, t, _ = q.shape
    scores = b * h * t * k.shape[-2]
    kept = scores * q.element_size() * layers if training else 0
    return kept + 3 * scores * 4


def free_memory(device: torch.device) -> int:
    """Bytes free on the device now: the CUDA allocator's view, else the host's MemAvailable."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


@functools.lru_cache(maxsize=8)
def budget(device: torch.device) -> int:
    """Bytes the scores of a quadratic kernel may take on the device (measured once per process)."""
    return int(BUDGET_SHARE * free_memory(device))


def fits(name: str, q: Tensor, k: Tensor, training: bool, layers: int) -> bool:
    """Whether this kernel's memory fits the budget: always for O(T) kernels."""
    return name not in QUADRATIC or score_bytes(q, k, training, layers) <= budget(q.device)


def probe_like(real: Tensor, shape: torch.Size | tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """Probe values of `shape` laid out in memory as `real` is (its strides, where it has that shape)."""
    values = probe(*shape, dtype=dtype).to(real.device)
    if tuple(real.shape) != tuple(shape) or values.stride() == real.stride():
        return values
    return torch.empty_strided(real.shape, real.stride(), dtype=dtype, device=real.device).copy_(values)


def timed_calls(
    names: list[str],
    q: Tensor,
    k: Tensor,
    mask: Tensor | None,
    causal: bool,
    scale: float,
    dropout: float,
    training: bool,
) -> dict[str, Callable[[], object]]:
    """One call per kernel that can take these inputs, on probe values of their shapes and memory layouts (the
    heads of a fused projection are strided views, which some kernels must copy): the forward, and in training the
    backward too; each returns its output (and the q, k, v gradients), so that the chooser can tell which give SDPA's
    result bit for bit. Any dropout draws from a forked random stream; the global one is untouched."""
    device, dtype, kv_shape = q.device, q.dtype, (*q.shape[:2], *k.shape[2:])  # keys with every query head
    qp, kp, vp = (probe_like(real, shape, dtype) for real, shape in ((q, q.shape), (k, kv_shape), (k, kv_shape)))
    grad = probe(*q.shape, dtype=dtype).to(device)
    mask = mask.detach() if mask is not None else None
    for t in (qp, kp, vp):
        t.requires_grad_(training)

    def run(kernel: Kernel) -> tuple[Tensor, ...]:
        forked = torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])
        with forked, own_saved_tensors(), torch.enable_grad() if training else nullcontext():
            y = kernel(qp, kp, vp, mask, causal, scale, dropout)  # (B, H, T, Dh)
            grads = torch.autograd.grad(y, (qp, kp, vp), grad) if training else ()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return (y.detach(), *grads)

    calls = {}
    for name in names:
        call = functools.partial(run, KERNELS[name])
        try:
            with warnings.catch_warnings():  # SDPA warns why a backend it was held to cannot run
                warnings.simplefilter("ignore")
                call()  # ... and then raises
        except RuntimeError:
            continue
        calls[name] = call
    return calls
