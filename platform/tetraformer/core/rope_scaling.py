"""RoPE frequency scaling for long contexts: linear, Llama 3's frequency bands and YaRN, as transformers computes it.

`rope_scaling` is a dict naming its `rope_type` and that type's parameters, with the keys (and spellings) of
Hugging Face's `rope_parameters`, so a config.json's entries carry over as they are.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

ROPE_SCALINGS: dict[str, tuple[str, ...]] = {  # rope_scaling's `rope_type` -> the keys it needs
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings"),
}
ROPE_OPTIONAL: dict[str, tuple[str, ...]] = {  # keys a type may also take
    "yarn": ("attention_factor", "mscale", "mscale_all_dim", "beta_fast", "beta_slow", "truncate"),
}


def rope_frequencies(rot_dim: int, base: float, scaling: dict | None = None) -> tuple[Tensor, float]:
    """(rot_dim / 2,) rotation frequencies base^(-2i/d) rescaled as `scaling` says, and the factor on cos and sin.

    linear divides every frequency by `factor`; llama3 divides the low ones (wavelength above
    original_max_position_embeddings / low_freq_factor) by `factor`, keeps the high ones (wavelength below
    original_max_position_embeddings / high_freq_factor) and blends linearly in between; yarn blends
    interpolated and original frequencies over a ramp of dimensions and scales attention (cos and sin).
    """
    kind = (scaling or {}).get("rope_type")
    if kind == "yarn":
        return _yarn(rot_dim, base, scaling)
    inv_freq = 1.0 / (base ** (torch.arange(0, rot_dim, 2, dtype=torch.int64).float() / rot_dim))
    if kind == "linear":
        return inv_freq / scaling["factor"], 1.0
    if kind == "llama3":
        return _llama3(inv_freq, scaling), 1.0
    return inv_freq, 1.0


def rope_inv_freq(rot_dim: int, base: float, scaling: dict | None = None) -> Tensor:
    """The rotation frequencies alone (rope_frequencies)."""
    return rope_frequencies(rot_dim, base, scaling)[0]


def _llama3(inv_freq: Tensor, scaling: dict) -> Tensor:
    """Llama 3.1's frequency bands (transformers' _compute_llama3_parameters)."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    context = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > context / low, inv_freq / factor, inv_freq)
    smooth = (context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < context / high) * ~(wavelen > context / low)
    return torch.where(medium, smoothed, scaled)


def _yarn(dim: int, base: float, scaling: dict) -> tuple[Tensor, float]:
    """YaRN's frequencies and attention factor (transformers' _compute_yarn_parameters)."""
    factor, context = scaling["factor"], scaling["original_max_position_embeddings"]
    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = float(_mscale(factor, mscale) / _mscale(factor, mscale_all_dim))
        else:
            attention_factor = _mscale(factor)
    beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(context / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    high = high + 0.001 if low == high else high  # no division by zero
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation = 1 - ramp
    inv_freq = 1.0 / (factor * pos_freqs) * (1 - extrapolation) + 1.0 / pos_freqs * extrapolation
    return inv_freq, float(attention_factor)


def _mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature for a context `scale` times longer."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0
