"""The four families as compositions of embeddings, one stack class and heads.

BERT = TokenEmbedding + Encoder;  GPT = TokenEmbedding + Decoder + tied LMHead;
T5 = shared TokenEmbedding + Encoder + cross-attending Decoder + LMHead;  ViT = PatchEmbedding + Encoder.
Each splits `forward_features` (the backbone) from its head so heads can be swapped.
"""

from __future__ import annotations

from torch import Tensor, nn

from tetraformer.core.cache import KVCache
from tetraformer.core.config import TransformerConfig
from tetraformer.core.embeddings import PatchEmbedding, TokenEmbedding
from tetraformer.core.heads import ClassificationHead, LMHead
from tetraformer.core.init import init_weights
from tetraformer.core.stack import Decoder, Encoder, StackOutput


class TextEncoder(nn.Module):
    """BERT-style backbone: token (+ segment) embeddings and a bidirectional encoder."""

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


class ImageEncoder(nn.Module):
    """ViT backbone: patch embeddings with a [CLS] token and a bidirectional encoder."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed, self.encoder = PatchEmbedding(cfg), Encoder(cfg)
        init_weights(self, cfg)

    def forward_features(
        self, pixel_values: Tensor, attention_mask: Tensor | None = None, **kw
    ) -> StackOutput:
        """(B, C, H, W) images (optional (B, 1 + N) mask) -> encoder output over [CLS] + patches."""
        return self.encoder(self.embed(pixel_values), attention_mask, **kw)

    forward = forward_features


class SequenceClassifier(nn.Module):
    """Any encoder backbone (text or image) with a pooled classification head."""

    def __init__(
        self, backbone: nn.Module, num_classes: int, pooling: str = "cls", pooler: bool = False
    ) -> None:
        super().__init__()
        self.backbone = backbone
        d, p = backbone.cfg.d_model, backbone.cfg.dropout
        self.head = ClassificationHead(d, num_classes, pooling, pooler, dropout=p)
        init_weights(self.head, backbone.cfg)

    def forward(self, *args: Tensor, attention_mask: Tensor | None = None, **kw: Tensor) -> Tensor:
        """Backbone inputs -> (B, num_classes) logits."""
        features = self.backbone.forward_features(
            *args, attention_mask=attention_mask, **kw
        ).last_hidden_state
        return self.head(features, attention_mask)


class CausalLM(nn.Module):
    """GPT-style decoder-only language model with a (tied) LM head and a KV cache."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed, self.decoder = TokenEmbedding(cfg), Decoder(cfg)
        self.lm_head = LMHead(cfg, self.embed.tokens)
        init_weights(self, cfg)

    def forward_features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        cache: KVCache | None = None,
        position_ids: Tensor | None = None,
        **kw,
    ) -> StackOutput:
        """(B, T) ids -> decoder output; with a cache, ids are the new tokens and the mask covers all.

        position_ids (B, T) count real tokens only, so left-padded rows get absolute positions from 0.
        """
        offset = cache.offset if cache is not None else 0
        x = self.embed(input_ids, offset=offset, position_ids=position_ids)
        return self.decoder(x, attention_mask, cache=cache, **kw)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        cache: KVCache | None = None,
        position_ids: Tensor | None = None,
    ) -> Tensor:
        """(B, T) ids -> (B, T, V) next-token logits."""
        h = self.forward_features(input_ids, attention_mask, cache, position_ids).last_hidden_state
        return self.lm_head(h)

    def new_cache(self) -> KVCache:
        """An empty KV cache for incremental decoding."""
        return self.decoder.new_cache()


class Seq2SeqLM(nn.Module):
    """T5-style encoder-decoder with a shared token embedding and an LM head on the decoder."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = TokenEmbedding(cfg)
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg, cfg.n_decoder_layers or cfg.n_layers, cross_attention=True)
        self.lm_head = LMHead(cfg, self.embed.tokens)
        init_weights(self, cfg)

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

    def forward(
        self,
        input_ids: Tensor,
        decoder_input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> Tensor:
        """(B, S) source, (B, T) target ids -> (B, T, V) logits."""
        memory = self.encode(input_ids, attention_mask).last_hidden_state
        h = self.decode(decoder_input_ids, memory, attention_mask, decoder_attention_mask).last_hidden_state
        return self.lm_head(h)

    def new_cache(self) -> KVCache:
        """An empty decoder cache (self-attention K/V plus cross-attention K/V computed once)."""
        return self.decoder.new_cache()
