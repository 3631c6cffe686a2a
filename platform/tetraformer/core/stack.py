"""ONE Transformer stack; Encoder and Decoder only fix causality and cross-attention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from tetraformer.core.cache import KVCache
from tetraformer.core.config import TransformerConfig
from tetraformer.core.layers import Block, make_norm
from tetraformer.core.masks import combine_masks, mask_to_bias
from tetraformer.core.position_layers import attention_bias, rotary
from tetraformer.core.positions import Rotary


@dataclass
class StackOutput:
    """Final hidden states and, when asked for, every layer's hidden states and attention weights."""

    last_hidden_state: Tensor  # (B, T, D)
    hidden_states: tuple[Tensor, ...] | None = None  # n_layers + 1 of (B, T, D): input, then each layer
    attentions: tuple[Tensor, ...] | None = None  # n_layers of (B, H, T, T)
    cross_attentions: tuple[Tensor, ...] | None = None  # n_layers of (B, H, T, S)


MAX_BIAS_TABLE = 1024  # longest reserved cache whose (1, H, L, L) position-bias table is kept for decoding


class TransformerStack(nn.Module):
    """A stack of blocks over already-embedded inputs, with in-attention positions shared by all layers."""

    def __init__(self, cfg: TransformerConfig, n_layers: int, causal: bool, cross_attention: bool) -> None:
        super().__init__()
        self.causal, self.checkpointing = causal, cfg.activation_checkpointing
        self.window = cfg.sliding_window if causal else None  # a sliding window limits causal self-attention
        self.layers = nn.ModuleList(Block(cfg, cross_attention) for _ in range(n_layers))
        self.final_norm = make_norm(cfg) if cfg.norm_position == "pre" else nn.Identity()
        self.position_bias, self.rotary = attention_bias(cfg, causal), rotary(cfg)

    def forward(
        self,
        x: Tensor,
        padding_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        position_ids: Tensor | None = None,
        document_ids: Tensor | None = None,
    ) -> StackOutput:
        """(B, T, D) -> StackOutput. padding_mask is (B, T_total) with True on real tokens, cached ones included.

        Without a cache, position_ids (B, T) give rotary angles per token (else offset..offset+T: cached decoding
        keeps its offsets, rotations being relative); document_ids (B, T) keep attention inside each document.
        Score biases (ALiBi, T5 buckets) depend on distances only, the same inside a document wherever it starts.
        """
        t = x.shape[1]
        offset = cache.offset if cache is not None else 0
        if document_ids is not None and cache is not None:
            raise ValueError("document_ids need a full forward pass: cached decoding sees one document per row")
        padding_mask, memory_mask = drop_full_mask(padding_mask), drop_full_mask(memory_mask)
        mask, is_causal = self._self_mask(x, padding_mask, offset, cache, document_ids)
        cross_mask = combine_masks(memory_mask, False, t, memory_mask.shape[1]) if memory_mask is not None else None
        angles = self._angles(t, offset, position_ids if cache is None else None)
        hidden, attns, cross_attns = [x], [], []
        for i, layer in enumerate(self.layers):
            x, w, cw = self._run_layer(
                layer,
                x,
                mask=mask,
                is_causal=is_causal,
                rotary=angles,
                memory=memory,
                memory_mask=cross_mask,
                cache=cache.layers[i] if cache is not None else None,
                need_weights=output_attentions,
            )
            hidden.append(x)
            attns.append(w)
            cross_attns.append(cw)
        if cache is not None:
            cache.offset += t
        x = self.final_norm(x)
        hidden[-1] = x
        return StackOutput(
            x,
            tuple(hidden) if output_hidden_states else None,
            tuple(attns) if output_attentions else None,
            tuple(cross_attns) if output_attentions and memory is not None else None,
        )

    def _run_layer(self, layer: nn.Module, x: Tensor, **kwargs: Any) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """One block; with activation checkpointing, a training pass keeps only its input and recomputes it in
        backward (non-reentrant, same RNG state: dropout masks repeat). Cached decoding and eval run it plainly."""
        if self.checkpointing and self.training and torch.is_grad_enabled() and kwargs["cache"] is None:
            return checkpoint(layer, x, use_reentrant=False, **kwargs)
        return layer(x, **kwargs)

    def _angles(self, t: int, offset: int, position_ids: Tensor | None) -> tuple[Rotary, Tensor, Tensor] | None:
        """Rotary cos/sin of the new tokens: (T, R/2) for offset..offset+T, or (B, 1, T, R/2) at position_ids."""
        if self.rotary is None:
            return None
        if position_ids is None:
            return (self.rotary, *self.rotary.angles(t, offset))
        cos, sin = self.rotary.angles(int(position_ids.max()) + 1)  # (P, R/2) each
        return self.rotary, cos[position_ids][:, None], sin[position_ids][:, None]

    def _self_mask(
        self,
        x: Tensor,
        padding_mask: Tensor | None,
        offset: int,
        cache: KVCache | None,
        documents: Tensor | None = None,
    ) -> tuple[Tensor | None, bool]:
        """Self-attention mask (boolean, or float when a position bias is folded in) and the SDPA causal flag.

        With a sliding window and a cache, the keys are the window - 1 positions before the new ones and
        these (what LayerCache.append returns), so the mask starts at position k_start.
        """
        t, k_len = x.shape[1], offset + x.shape[1]
        k_start = max(0, offset - (self.window - 1)) if self.window is not None and cache is not None else 0
        bias = self._position_bias(t, k_len, offset, cache)
        bias = bias[..., k_start:] if bias is not None else None
        padding_mask = padding_mask[:, k_start:] if padding_mask is not None else None
        all_seen = self.window is None or k_len <= self.window  # no key has left any query's window yet
        fused = (offset == 0 and all_seen) or t == 1
        if self.causal and padding_mask is None and bias is None and documents is None and fused:
            return None, offset == 0  # the fused causal kernel; one new token may attend every key anyway
        causal = self.causal and (t > 1 or not all_seen)  # one query at the last position sees every key
        window, length = self.window, k_len - k_start
        mask = combine_masks(padding_mask, causal, t, length, offset, x.device, window, k_start, documents=documents)
        return mask_to_bias(mask, bias, x.dtype), False

    def _position_bias(self, t: int, k_len: int, offset: int, cache: KVCache | None) -> Tensor | None:
        """(1, H, T, Tk) score bias of the new queries, sliced from a table the cache keeps when it reserved room."""
        if self.position_bias is None:
            return None
        if cache is None or k_len > cache.capacity or cache.capacity > MAX_BIAS_TABLE:
            return self.position_bias(t, k_len, offset)
        if cache.position_bias is None:
            cache.position_bias = self.position_bias(cache.capacity, cache.capacity)  # (1, H, L, L)
        return cache.position_bias[:, :, offset : offset + t, :k_len]


def drop_full_mask(mask: Tensor | None) -> Tensor | None:
    """None for a padding mask with no padding, so SDPA can use its mask-free (Flash) kernels."""
    if mask is None or mask.is_meta or torch.compiler.is_compiling() or not bool(mask.all()):
        return mask
    return None


class Encoder(TransformerStack):
    """Bidirectional self-attention stack."""

    def __init__(self, cfg: TransformerConfig, n_layers: int | None = None) -> None:
        super().__init__(cfg, n_layers or cfg.n_layers, causal=False, cross_attention=False)


class Decoder(TransformerStack):
    """Causal self-attention stack, optionally cross-attending to an encoder's output."""

    def __init__(self, cfg: TransformerConfig, n_layers: int | None = None, cross_attention: bool = False) -> None:
        super().__init__(cfg, n_layers or cfg.n_layers, causal=True, cross_attention=cross_attention)

    def new_cache(self) -> KVCache:
        """An empty cache with a layer cache per block (`reserve` it to preallocate)."""
        return KVCache.empty(len(self.layers), self.window)
