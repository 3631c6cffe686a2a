"""Attention layers that run the kernel their run's numerics name, or the fastest kernel that gives its result.

`use_chosen_attention` turns a built network's core `Attention` layers into `ChosenAttention` in place (same
parameters and state-dict keys), with the run's attention setting (accel/numerics.py: `TETRAFORMER_ATTENTION`,
or the checkpoint's on resume). A named kernel runs as named. With `auto`, the first time a kind of call is seen
(pass, device, dtype, head width, length buckets, mask kind: `attention_kernels.choice_key`), every candidate
kernel that fits the memory budget runs forward (and backward in training) on probe values; those whose outputs
and gradients equal SDPA's bit for bit are timed, the fastest is kept (SDPA's own pick unless another beats it by
`MARGIN`) and cached per machine in `attention_kernels-v2.json` beside the matmul layouts. A kernel that differs
is never chosen by timing: it would make the weights depend on the machine's load when the cache was filled.
Weights requested, the eager backend, single-query decoding steps and `torch.compile` keep the core's own path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from tetraformer.accel import attention_kernels as kernels
from tetraformer.accel.chooser import LayoutChooser, device_machine_key
from tetraformer.accel.numerics import from_env
from tetraformer.core.attention import Attention
from tetraformer.errors import ConfigError

log = logging.getLogger(__name__)

MARGIN = 1.25  # another kernel must beat SDPA's own pick by this factor: near-ties keep the default


CHOOSER = LayoutChooser(machine=device_machine_key, name="attention_kernels-v2.json", margin=MARGIN)


def choose(
    q: Tensor,
    k: Tensor,
    mask: Tensor | None,
    causal: bool,
    scale: float,
    dropout: float,
    layers: int,
    setting: str = "auto",
) -> str:
    """The kernel for this call: the one `setting` names, else (`auto`) the cached or newly measured fastest of
    those that give SDPA's result bit for bit; SDPA's pick when the choice's scores would not fit the memory
    budget."""
    training = torch.is_grad_enabled() and q.requires_grad
    name = setting
    if name == "auto":
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
    """The core's Attention (same parameters and state-dict keys) on its run's kernel."""

    layers: int = 1  # attention layers in the network: their kept scores share the memory budget
    kernel: str = "auto"  # accel/numerics.py's attention setting, set by use_chosen_attention

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """(B, H, T, Dh), (B, Hkv, S, Dh) x2 -> (B, H, T, Dh) on the chosen kernel (the core's path where the
        weights are wanted, the backend is eager, a decoding step has one query, or under torch.compile)."""
        if need_weights or self.backend == "eager" or q.shape[-2] == 1 or torch.compiler.is_compiling():
            return super().attend(q, k, v, mask, is_causal, need_weights)
        causal = is_causal and mask is None
        dropout = self.dropout if self.training else 0.0
        name = choose(q, k, mask, causal, self.scale, dropout, self.layers, self.kernel)
        if name == "sdpa":
            return super().attend(q, k, v, mask, is_causal)
        k, v = self.repeat_kv(k), self.repeat_kv(v)  # (B, H, S, Dh)
        try:
            return kernels.KERNELS[name](q, k, v, mask, causal, self.scale, dropout), None
        except RuntimeError as exc:
            if self.kernel == "auto":
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
        "unset it (auto runs SDPA's own pick) or set TETRAFORMER_ATTENTION=sdpa"
    )


def use_chosen_attention(net: nn.Module, kernel: str | None = None) -> list[Attention]:
    """Make every core Attention of `net` (and every ChosenAttention) a ChosenAttention on `kernel` (None: this
    process's setting, `numerics.from_env`) in place, its parameters untouched; returns them."""
    kernel = kernel or from_env().attention
    layers = [m for m in net.modules() if type(m) in (Attention, ChosenAttention)]
    for layer in layers:
        layer.__class__ = ChosenAttention
        layer.layers, layer.kernel = len(layers), kernel
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
            del layer.layers, layer.kernel
