"""Attention layers that run the kernel measured fastest on this machine for each kind of call.

`use_chosen_attention` turns a built network's core `Attention` layers into `ChosenAttention` in place (same
parameters and state-dict keys). The first time a kind of call is seen (pass, device, dtype, head width, length
buckets, mask kind: `attention_kernels.choice_key`), every candidate kernel that fits the memory budget is timed
forward (and backward in training) on probe values, the fastest is kept (SDPA's own pick unless another beats it
by `MARGIN`) and cached per machine in `attention_kernels.json` beside the matmul layouts. Weights requested,
the eager backend, single-query decoding steps and `torch.compile` keep the core's own path.
`TETRAFORMER_ATTENTION=sdpa|flash|efficient|cudnn|math|eager` forces one kernel; `auto` (the default) measures.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from tetraformer.accel import attention_kernels as kernels
from tetraformer.accel.chooser import LayoutChooser, device_machine_key
from tetraformer.core.attention import Attention
from tetraformer.errors import ConfigError

log = logging.getLogger(__name__)

MARGIN = 1.25  # another kernel must beat SDPA's own pick by this factor: near-ties keep the default


CHOOSER = LayoutChooser(machine=device_machine_key, name="attention_kernels.json", margin=MARGIN)


def forced() -> str | None:
    """The kernel TETRAFORMER_ATTENTION forces, or None to measure."""
    name = os.environ.get("TETRAFORMER_ATTENTION", "auto")
    if name != "auto" and name not in kernels.KERNELS:
        raise ValueError(f"TETRAFORMER_ATTENTION must be auto or one of {sorted(kernels.KERNELS)}, got {name!r}")
    return None if name == "auto" else name


def choose(q: Tensor, k: Tensor, mask: Tensor | None, causal: bool, scale: float, dropout: float, layers: int) -> str:
    """The kernel for this call: forced, else the cached or newly measured fastest; SDPA's pick when the
    choice's scores would not fit the memory budget."""
    training = torch.is_grad_enabled() and q.requires_grad
    name = forced()
    if name is None:
        key = kernels.choice_key(q, k, mask, causal, dropout, training)
        name = CHOOSER.pick(key, "sdpa", lambda: candidate_calls(q, k, mask, causal, scale, dropout, training, layers))
    return name if kernels.fits(name, q, k, training, layers) else "sdpa"


def candidate_calls(
    q: Tensor, k: Tensor, mask: Tensor | None, causal: bool, scale: float, dropout: float, training: bool, layers: int
) -> dict[str, object]:
    """Timed calls of the device's kernels that fit the memory budget (built only when a key is first timed)."""
    names = kernels.CANDIDATES.get(q.device.type, ("sdpa",))
    eligible = [n for n in names if kernels.fits(n, q, k, training, layers)]
    return kernels.timed_calls(eligible, q, k, mask, causal, scale, dropout, training)


class ChosenAttention(Attention):
    """The core's Attention (same parameters and state-dict keys) on the kernel measured fastest here."""

    layers: int = 1  # attention layers in the network: their kept scores share the memory budget

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """(B, H, T, Dh), (B, Hkv, S, Dh) x2 -> (B, H, T, Dh) on the chosen kernel (the core's path where the
        weights are wanted, the backend is eager, a decoding step has one query, or under torch.compile)."""
        if need_weights or self.backend == "eager" or q.shape[-2] == 1 or torch.compiler.is_compiling():
            return super().attend(q, k, v, mask, is_causal, need_weights)
        causal = is_causal and mask is None
        dropout = self.dropout if self.training else 0.0
        name = choose(q, k, mask, causal, self.scale, dropout, self.layers)
        if name == "sdpa":
            return super().attend(q, k, v, mask, is_causal)
        k, v = self.repeat_kv(k), self.repeat_kv(v)  # (B, H, S, Dh)
        try:
            return kernels.KERNELS[name](q, k, v, mask, causal, self.scale, dropout), None
        except RuntimeError as exc:
            if forced() is None:
                raise
            raise forced_kernel_error(name, q, mask, causal, dropout, exc) from None


def forced_kernel_error(
    name: str, q: Tensor, mask: Tensor | None, causal: bool, dropout: float, exc: RuntimeError
) -> ConfigError:
    """One line saying why the kernel TETRAFORMER_ATTENTION forces cannot run this call, and what can."""
    call = f"{kernels.mask_kind(mask, causal)} mask, {str(q.dtype).removeprefix('torch.')} on {q.device.type}"
    call += ", dropout" if dropout else ""
    reason = str(exc).strip().splitlines()[0].rstrip(". ") if str(exc).strip() else type(exc).__name__
    return ConfigError(
        f"TETRAFORMER_ATTENTION={name} cannot run this attention call ({call}): {reason}; "
        "unset it (auto measures the kernels that can) or set TETRAFORMER_ATTENTION=sdpa"
    )


def use_chosen_attention(net: nn.Module) -> list[Attention]:
    """Make every core Attention of `net` a ChosenAttention in place (its parameters untouched); returns them."""
    layers = [m for m in net.modules() if type(m) is Attention]
    for layer in layers:
        layer.__class__ = ChosenAttention
        layer.layers = len(layers)
    if layers:
        log.debug("%d attention layers take the measured kernels", len(layers))
    return layers


@contextmanager
def measured_attention(net: nn.Module) -> Iterator[None]:
    """Within, `net`'s core Attention layers are ChosenAttention; stock again on exit."""
    layers = use_chosen_attention(net)
    try:
        yield
    finally:
        for layer in layers:
            layer.__class__ = Attention
