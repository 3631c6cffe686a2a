"""Multi-head self- and cross-attention over SDPA, with an eager path that returns weights.

With n_kv_heads < n_heads (grouped-query attention) keys and values have fewer heads, each shared by
n_heads / n_kv_heads query heads; the KV cache stores only the key/value heads. qk_norm normalises each
head's queries and keys (Qwen3) before rotary positions turn them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.core.cache import LayerCache
from tetraformer.core.config import TransformerConfig
from tetraformer.core.masks import causal_mask
from tetraformer.core.norms import make_norm
from tetraformer.core.positions import Rotary

SDPA_GQA = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 5)  # SDPA takes enable_gqa


class Attention(nn.Module):
    """Multi-head attention; self-attention projects Q, K and V with one fused matmul."""

    def __init__(self, cfg: TransformerConfig, cross: bool = False) -> None:
        super().__init__()
        self.cross, self.n_heads, self.n_kv_heads, self.head_dim = cross, cfg.n_heads, cfg.kv_heads, cfg.head_dim
        self.inner, self.backend, self.dropout = cfg.inner_dim, cfg.attention, cfg.attn_dropout
        self.kv_inner = cfg.kv_heads * cfg.head_dim
        self.scale = cfg.head_dim**-0.5 if cfg.scale_attention else 1.0
        if cross:
            self.q = nn.Linear(cfg.d_model, self.inner, bias=cfg.use_qkv_bias)
            self.kv = nn.Linear(cfg.d_model, 2 * self.kv_inner, bias=cfg.use_qkv_bias)
        else:
            self.qkv = nn.Linear(cfg.d_model, self.inner + 2 * self.kv_inner, bias=cfg.use_qkv_bias)
        self.out = nn.Linear(self.inner, cfg.d_model, bias=cfg.bias)
        self.q_norm = make_norm(cfg, cfg.head_dim) if cfg.qk_norm else None
        self.k_norm = make_norm(cfg, cfg.head_dim) if cfg.qk_norm else None

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        memory: Tensor | None = None,
        is_causal: bool = False,
        rotary: tuple[Rotary, Tensor, Tensor] | None = None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """(B, T, D) -> (B, T, D); mask is boolean "may attend" or an additive float bias (B|1, H|1, T, S)."""
        q, k, v = self._project(x, memory, cache)  # (B, H, T, Dh), (B, Hkv, S, Dh) x2
        if rotary is not None:
            rope, cos, sin = rotary  # angles of the new positions only
            q, k = rope(q, cos, sin), rope(k, cos, sin)
        if cache is not None and not self.cross:
            k, v = cache.append(k, v)
        y, weights = self.attend(q, k, v, mask, is_causal, need_weights)  # (B, H, T, Dh)
        y = y.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.inner)  # (B, T, H*Dh)
        return self.out(y), weights

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """softmax(q k^T * scale + mask) v: (B, H, T, Dh), (B, Hkv, S, Dh) x2 -> (B, H, T, Dh), and the weights
        when asked. The one place attention is computed: accel's measured kernels replace this method."""
        dropout, eager = self.dropout if self.training else 0.0, need_weights or self.backend == "eager"
        t, s = q.shape[-2], k.shape[-2]
        if is_causal and mask is None and t != s:  # the T queries are the last of S keys (SDPA aligns the first)
            mask = causal_mask(t, s, s - t, q.device)[None, None]  # (1, 1, T, S)
        gqa = {}  # SDPA's own grouped-query path: torch >= 2.5, and only without a mask (else it is the slow kernel)
        if self.n_kv_heads != self.n_heads and (eager or mask is not None or not SDPA_GQA):
            k, v = self.repeat_kv(k), self.repeat_kv(v)  # (B, H, S, Dh)
        elif self.n_kv_heads != self.n_heads:
            gqa = {"enable_gqa": True}
        if eager:
            return eager_attention(q, k, v, mask, is_causal, self.scale, dropout)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal and mask is None, scale=self.scale, **gqa
        )
        return y, None

    def repeat_kv(self, x: Tensor) -> Tensor:
        """Key or value heads shared by groups of query heads, repeated: (B, Hkv, S, Dh) -> (B, H, S, Dh)."""
        return x if self.n_kv_heads == self.n_heads else x.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)

    def _project(self, x: Tensor, memory: Tensor | None, cache: LayerCache | None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries from x; keys/values from x (self) or the memory (cross, computed once per cache)."""
        if not self.cross:
            q, k, v = self.qkv(x).split((self.inner, self.kv_inner, self.kv_inner), dim=-1)
            return self._heads(q, self.q_norm), self._heads(k, self.k_norm), self._heads(v)
        q = self._heads(self.q(x), self.q_norm)
        if cache is not None and cache.cross_kv is not None:
            return q, *cache.cross_kv
        if memory is None:
            raise ValueError("cross-attention needs the encoder output (memory)")
        k, v = self.kv(memory).chunk(2, dim=-1)
        k, v = self._heads(k, self.k_norm), self._heads(v)
        if cache is not None:
            cache.cross_kv = (k, v)
        return q, k, v

    def _heads(self, x: Tensor, norm: nn.Module | None = None) -> Tensor:
        """(B, T, h*Dh) -> (B, h, T, Dh) (a view unless each head is normalised)."""
        x = x.unflatten(-1, (-1, self.head_dim))
        return (norm(x) if norm is not None else x).transpose(1, 2)


def eager_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float, dropout: float
) -> tuple[Tensor, Tensor]:
    """Reference attention that also returns the (B, H, T, S) attention weights."""
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, T, S)
    if is_causal and mask is None:
        t, s = scores.shape[-2:]
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = scores.float().softmax(dim=-1).to(q.dtype)
    return F.dropout(weights, dropout, training=dropout > 0) @ v, weights
