"""Building blocks of a layer: norms, feed-forward blocks and the Transformer block itself."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.core.attention import Attention
from tetraformer.core.cache import LayerCache
from tetraformer.core.config import TransformerConfig
from tetraformer.core.norms import make_norm
from tetraformer.core.positions import Rotary

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "swiglu": F.silu,
    "geglu": F.gelu,
    "geglu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


class FeedForward(nn.Module):
    """Position-wise MLP; gated variants (SwiGLU, GEGLU) fuse their two input projections."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.gated, self.act = cfg.gated, ACTIVATIONS[cfg.activation]
        self.up = nn.Linear(cfg.d_model, (2 if cfg.gated else 1) * cfg.d_ff, bias=cfg.bias)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.ffn_dropout)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, D)."""
        h = self.up(x)  # (B, T, F) or (B, T, 2F)
        if self.gated:
            gate, value = h.chunk(2, dim=-1)
            h = self.act(gate) * value
        else:
            h = self.act(h)
        return self.down(self.dropout(h) if self.training else h)  # skipping the call saves per-token time


class Block(nn.Module):
    """Self-attention, optional cross-attention and feed-forward, each a residual sub-layer."""

    def __init__(self, cfg: TransformerConfig, cross_attention: bool = False) -> None:
        super().__init__()
        self.pre_norm = cfg.norm_position == "pre"
        self.self_attn, self.norm1 = Attention(cfg), make_norm(cfg)
        self.cross_attn = Attention(cfg, cross=True) if cross_attention else None
        self.norm_cross = make_norm(cfg) if cross_attention else None
        self.ffn, self.norm2 = FeedForward(cfg), make_norm(cfg)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        is_causal: bool = False,
        rotary: tuple[Rotary, Tensor, Tensor] | None = None,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """(B, T, D) -> (B, T, D), plus self- and cross-attention weights when asked for."""
        attn = partial(
            self.self_attn,
            mask=mask,
            is_causal=is_causal,
            rotary=rotary,
            cache=cache,
            need_weights=need_weights,
        )
        x, self_weights = self._residual(x, self.norm1, attn)
        cross_weights = None
        if self.cross_attn is not None:
            cross = partial(self.cross_attn, mask=memory_mask, memory=memory, cache=cache, need_weights=need_weights)
            x, cross_weights = self._residual(x, self.norm_cross, cross)
        x, _ = self._residual(x, self.norm2, self._ffn)
        return x, self_weights, cross_weights

    def _ffn(self, x: Tensor) -> tuple[Tensor, None]:
        """The feed-forward sub-layer, shaped like an attention sub-layer's output."""
        return self.ffn(x), None

    def _residual(self, x: Tensor, norm: nn.Module, sublayer: Callable) -> tuple[Tensor, Tensor | None]:
        """Pre-norm: x + f(norm(x)); post-norm: norm(x + f(x))."""
        if self.pre_norm:
            out, weights = sublayer(norm(x))
            return x + self._drop(out), weights
        out, weights = sublayer(x)
        return norm(x + self._drop(out)), weights

    def _drop(self, x: Tensor) -> Tensor:
        """Residual dropout, not even called in eval (decoding runs this per token and layer)."""
        return self.dropout(x) if self.training else x
