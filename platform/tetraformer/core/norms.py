"""The config's normalisation layer (LayerNorm or RMSNorm), over the residual stream or one attention head."""

from __future__ import annotations

from torch import nn

from tetraformer.core.config import TransformerConfig


def make_norm(cfg: TransformerConfig, dim: int | None = None) -> nn.Module:
    """LayerNorm or RMSNorm over `dim` (d_model by default), with the config's epsilon and bias setting."""
    dim = dim or cfg.d_model
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(dim, eps=cfg.norm_eps)
    return nn.LayerNorm(dim, eps=cfg.norm_eps, bias=cfg.bias)
