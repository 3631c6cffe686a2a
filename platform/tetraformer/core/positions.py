"""Position encodings: sinusoidal, learned, T5 relative bias, rotary (RoPE) and ALiBi.

POSITION_TYPES is the one place that says what each `position` setting is; everything else asks it
(through `cfg.position_type` / `cfg.absolute_positions`) or the builders in position_layers.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from tetraformer.core.rope_scaling import rope_frequencies

Position = Literal["sinusoidal", "learned", "relative", "rotary", "alibi", "none"]


@dataclass(frozen=True)
class PositionType:
    """Where one kind of position information enters the model."""

    absolute: bool  # a table added to the embeddings (bounded by max_len), else inside attention or none


POSITION_TYPES: dict[str, PositionType] = {
    "sinusoidal": PositionType(absolute=True),
    "learned": PositionType(absolute=True),
    "relative": PositionType(absolute=False),
    "rotary": PositionType(absolute=False),
    "alibi": PositionType(absolute=False),
    "none": PositionType(absolute=False),
}


def sinusoidal_table(n_positions: int, dim: int) -> Tensor:
    """(n_positions, dim): PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d))."""
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    inv_freq = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (ceil(d/2),)
    table = torch.zeros(n_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq[: dim // 2])
    return table.float()


def sinusoidal_2d_table(rows: int, cols: int, dim: int) -> Tensor:
    """(1 + rows*cols, dim) for [CLS] + a row-major patch grid: [CLS] gets zeros; of each patch's channels the
    first half encodes its row and the second half its column, each as a 1D sin-cos table."""
    half = dim // 2
    row = sinusoidal_table(rows, half)[:, None, :].expand(rows, cols, half)  # (R, C, D/2)
    col = sinusoidal_table(cols, dim - half)[None, :, :].expand(rows, cols, dim - half)  # (R, C, D - D/2)
    grid = torch.cat((row, col), dim=-1).reshape(rows * cols, dim)  # (R*C, D)
    return torch.cat((torch.zeros(1, dim), grid), dim=0)


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal absolute positions, added to the embeddings."""

    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(max_len, dim), persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        """(..., T) integer positions -> (..., T, D) encodings."""
        return self.table[positions]

    def span(self, start: int, length: int) -> Tensor:
        """(length, D) encodings of positions start..start+length."""
        return self.table[start : start + length]


class LearnedPositions(nn.Embedding):
    """Trainable absolute position embeddings, added to the token embeddings."""

    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__(max_len, dim)

    def span(self, start: int, length: int) -> Tensor:
        """(length, D) rows of positions start..start+length (a slice: its gradient is a cheap add)."""
        return self.weight[start : start + length]


def relative_position_bucket(relative: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """T5's log-bucketing of (key - query) distances into num_buckets integer buckets."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    """T5 relative attention bias: one learned scalar per (bucket, head), shared by all layers."""

    def __init__(self, n_heads: int, num_buckets: int, max_distance: int, bidirectional: bool) -> None:
        super().__init__()
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.bias = nn.Embedding(num_buckets, n_heads)

    def forward(self, q_len: int, k_len: int, offset: int = 0) -> Tensor:
        """(1, H, Tq, Tk) additive bias for queries at offset..offset+Tq and keys at 0..Tk."""
        device = self.bias.weight.device
        q_pos = torch.arange(offset, offset + q_len, device=device)[:, None]
        k_pos = torch.arange(k_len, device=device)[None, :]
        buckets = relative_position_bucket(k_pos - q_pos, self.bidirectional, self.num_buckets, self.max_distance)
        return self.bias(buckets).permute(2, 0, 1)[None]  # (1, H, Tq, Tk)


def alibi_slopes(n_heads: int) -> Tensor:
    """Per-head ALiBi slopes: a geometric sequence, interleaved when n_heads is not a power of 2."""

    def powers(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return torch.tensor(powers(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    extra = powers(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(powers(closest) + extra)


class ALiBi(nn.Module):
    """Attention with Linear Biases: score(i, j) -= slope_h * |i - j|."""

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def forward(self, q_len: int, k_len: int, offset: int = 0) -> Tensor:
        """(1, H, Tq, Tk) additive bias; symmetric, so it also serves bidirectional encoders."""
        q_pos = torch.arange(offset, offset + q_len, device=self.slopes.device)[:, None]
        k_pos = torch.arange(k_len, device=self.slopes.device)[None, :]
        distance = (k_pos - q_pos).abs().float()  # (Tq, Tk)
        return -self.slopes[None, :, None, None] * distance[None, None]


class Rotary(nn.Module):
    """Rotary position embedding (RoPE), applied to queries and keys inside attention."""

    def __init__(
        self, head_dim: int, base: float = 10000.0, fraction: float = 1.0, scaling: dict | None = None
    ) -> None:
        super().__init__()
        self.rot_dim = int(head_dim * fraction) // 2 * 2
        inv_freq, self.attention_factor = rope_frequencies(self.rot_dim, base, scaling)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def angles(self, length: int, offset: int = 0) -> tuple[Tensor, Tensor]:
        """cos and sin tables, each (T, rot_dim / 2), for positions offset..offset+T."""
        pos = torch.arange(offset, offset + length, device=self.inv_freq.device, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        if self.attention_factor != 1.0:  # YaRN scales queries and keys alike
            return freqs.cos() * self.attention_factor, freqs.sin() * self.attention_factor
        return freqs.cos(), freqs.sin()

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """Rotate (B, H, T, Dh) by the angles; pairs are (first half, second half) of the rotated dims."""
        rot, rest = x[..., : self.rot_dim], x[..., self.rot_dim :]
        x1, x2 = rot.float().chunk(2, dim=-1)  # (B, H, T, R/2) each
        rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
        return torch.cat((rotated, rest), dim=-1) if rest.shape[-1] else rotated
