"""Backbones: embeddings plus stacks, each with `forward_features(input_ids, attention_mask, ...)`.

BERT-like TextEncoder, GPT-like TextDecoder, T5-like TextEncoderDecoder and the ViT ImageEncoder. Each has
`.cfg`, a class attribute `causal` (may a position see later ones?) and `default_pooling` (how a sequence
classifier on it pools when not told). `build_backbone(cfg, kind)` is the one way a task gets a text backbone.
"""

from __future__ import annotations

from typing import Literal, get_args

from torch import Tensor, nn

from tetraformer.core.cache import KVCache
from tetraformer.core.config import TransformerConfig
from tetraformer.core.embeddings import PatchEmbedding, TokenEmbedding
from tetraformer.core.heads import Pooling
from tetraformer.core.init import init_weights
from tetraformer.core.stack import Decoder, Encoder, StackOutput

BackboneKind = Literal["encoder", "decoder", "encoder_decoder"]
BACKBONE_KINDS: tuple[str, ...] = get_args(BackboneKind)


class TextEncoder(nn.Module):
    """BERT-style backbone: token (+ segment) embeddings and a bidirectional encoder."""

    causal = False
    default_pooling: Pooling = "cls"

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed, self.encoder = TokenEmbedding(cfg), Encoder(cfg)
        init_weights(self, cfg)

    def forward_features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        **kw,
    ) -> StackOutput:
        """(B, T) ids and (B, T) real-token mask -> encoder output."""
        return self.encoder(self.embed(input_ids, token_type_ids), attention_mask, **kw)

    forward = forward_features


class TextDecoder(nn.Module):
    """GPT-style backbone: token embeddings and a causal decoder, with a KV cache for decoding."""

    causal = True
    default_pooling: Pooling = "last"

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed, self.decoder = TokenEmbedding(cfg), Decoder(cfg)
        self._add_head(cfg)
        init_weights(self, cfg)

    def _add_head(self, cfg: TransformerConfig) -> None:
        """Where a model built on this backbone attaches its head, so one init pass covers both."""

    def forward_features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        cache: KVCache | None = None,
        position_ids: Tensor | None = None,
        **kw,
    ) -> StackOutput:
        """(B, T) ids -> decoder output; with a cache, ids are the new tokens and the mask covers all.

        position_ids (B, T) count real tokens only, so left-padded rows (and examples packed into one row, with
        `document_ids` in `kw`) get positions from 0, absolute or rotary.
        """
        offset = cache.offset if cache is not None else 0
        x = self.embed(input_ids, offset=offset, position_ids=position_ids)
        return self.decoder(x, attention_mask, cache=cache, position_ids=position_ids, **kw)

    forward = forward_features

    def new_cache(self) -> KVCache:
        """An empty KV cache for incremental decoding."""
        return self.decoder.new_cache()


class TextEncoderDecoder(nn.Module):
    """T5-style backbone: a shared token embedding, an encoder and a cross-attending decoder.

    Its features are the encoder's (bidirectional, so `causal` is False) unless decoder ids are given.
    """

    causal = False
    default_pooling: Pooling = "mean"

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = TokenEmbedding(cfg)
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg, cfg.n_decoder_layers or cfg.n_layers, cross_attention=True)
        self._add_head(cfg)
        init_weights(self, cfg)

    def _add_head(self, cfg: TransformerConfig) -> None:
        """Where a model built on this backbone attaches its head, so one init pass covers both."""

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None, **kw) -> StackOutput:
        """(B, S) source ids -> encoder output."""
        return self.encoder(self.embed(input_ids), attention_mask, **kw)

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        cache: KVCache | None = None,
        **kw,
    ) -> StackOutput:
        """(B, T) target ids attending to (B, S, D) memory -> decoder output."""
        offset = cache.offset if cache is not None else 0
        x = self.embed(decoder_input_ids, offset=offset)
        return self.decoder(x, decoder_attention_mask, memory, attention_mask, cache, **kw)

    def forward_features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        **kw,
    ) -> StackOutput:
        """(B, S) source ids -> encoder output; with (B, T) decoder ids, the decoder's output over them."""
        encoded = self.encode(input_ids, attention_mask, **kw)
        if decoder_input_ids is None:
            return encoded
        memory = encoded.last_hidden_state  # (B, S, D)
        return self.decode(decoder_input_ids, memory, attention_mask, decoder_attention_mask, **kw)

    forward = forward_features

    def new_cache(self) -> KVCache:
        """An empty decoder cache (self-attention K/V plus cross-attention K/V computed once)."""
        return self.decoder.new_cache()


class ImageEncoder(nn.Module):
    """ViT backbone: patch embeddings with a [CLS] token and a bidirectional encoder."""

    causal = False
    default_pooling: Pooling = "cls"

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed, self.encoder = PatchEmbedding(cfg), Encoder(cfg)
        init_weights(self, cfg)

    def forward_features(self, pixel_values: Tensor, attention_mask: Tensor | None = None, **kw) -> StackOutput:
        """(B, C, H, W) images (optional (B, 1 + N) mask) -> encoder output over [CLS] + patches."""
        return self.encoder(self.embed(pixel_values), attention_mask, **kw)

    forward = forward_features


TextBackbone = TextEncoder | TextDecoder | TextEncoderDecoder


def build_backbone(cfg: TransformerConfig, kind: BackboneKind) -> TextBackbone:
    """The text backbone of one kind, after checking that the config describes it.

    encoder / decoder: n_decoder_layers must be 0 (a decoder stack would be silently dropped otherwise).
    encoder_decoder: n_decoder_layers = 0 means "as many as the encoder"; the backbone's cfg then says so.
    """
    if kind not in BACKBONE_KINDS:
        raise ValueError(f"unknown backbone kind {kind!r}; expected one of {BACKBONE_KINDS}")
    if cfg.vocab_size < 1:
        raise ValueError(f"a text backbone needs vocab_size > 0, got {cfg.vocab_size}")
    if kind == "encoder_decoder":
        return TextEncoderDecoder(cfg if cfg.is_encoder_decoder else cfg.replace(n_decoder_layers=cfg.n_layers))
    if cfg.is_encoder_decoder:
        raise ValueError(
            f"a {kind} backbone has one stack: set n_decoder_layers to 0 (got {cfg.n_decoder_layers}) "
            "or build kind='encoder_decoder'"
        )
    return TextEncoder(cfg) if kind == "encoder" else TextDecoder(cfg)
