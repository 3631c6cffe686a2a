"""The position modules a config asks for: an additive table, a score bias, or a rotation of queries and keys."""

from __future__ import annotations

from torch import nn

from tetraformer.core.config import TransformerConfig
from tetraformer.core.positions import ALiBi, LearnedPositions, RelativePositionBias, Rotary, SinusoidalPositions


def absolute_table(cfg: TransformerConfig, n_positions: int) -> nn.Module | None:
    """The config's additive (n_positions, D) table, or None when positions live inside attention."""
    if not cfg.absolute_positions:
        return None
    table = LearnedPositions if cfg.position == "learned" else SinusoidalPositions
    return table(n_positions, cfg.d_model)


def attention_bias(cfg: TransformerConfig, causal: bool) -> nn.Module | None:
    """The config's additive score bias (T5 relative buckets or ALiBi), or None."""
    if cfg.position == "relative":
        return RelativePositionBias(
            cfg.n_heads, cfg.relative_buckets, cfg.relative_max_distance, bidirectional=not causal
        )
    return ALiBi(cfg.n_heads) if cfg.position == "alibi" else None


def rotary(cfg: TransformerConfig) -> Rotary | None:
    """The config's rotation of queries and keys (RoPE), or None."""
    if cfg.position != "rotary":
        return None
    return Rotary(cfg.head_dim, cfg.rope_base, cfg.rope_fraction, cfg.rope_scaling)
