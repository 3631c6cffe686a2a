"""The families as a backbone plus a head: classifiers on any backbone, and the two language models.

BERT = TextEncoder + heads;  GPT = TextDecoder + tied LMHead;  T5 = TextEncoderDecoder + LMHead;
ViT = ImageEncoder + ClassificationHead. Backbones (see backbones.py) give `forward_features`; heads map
its features (and the real-token mask) to outputs, so a head can sit on any backbone.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tetraformer.core.backbones import ImageEncoder, TextDecoder, TextEncoder, TextEncoderDecoder
from tetraformer.core.cache import KVCache
from tetraformer.core.config import TransformerConfig
from tetraformer.core.heads import ClassificationHead, LMHead, Pooling, TokenClassificationHead
from tetraformer.core.init import init_weights

DECODER_START_ID = 0  # the pad id of the project's tokenizers, T5's decoder start convention

__all__ = [
    "CausalLM",
    "ImageEncoder",
    "Seq2SeqLM",
    "SequenceClassifier",
    "TextDecoder",
    "TextEncoder",
    "TextEncoderDecoder",
    "TokenClassifier",
]


class SequenceClassifier(nn.Module):
    """Any backbone (text or image, encoder or decoder) with a pooled classification head.

    pooling None takes the backbone's natural choice: [CLS] on encoders, the last real token on causal
    decoders, the mean over the encoder of an encoder-decoder. `decoder` (encoder-decoder only) runs one
    decoder step from token DECODER_START_ID over the encoded row and classifies that state.
    """

    def __init__(
        self, backbone: nn.Module, num_classes: int, pooling: Pooling | None = None, pooler: bool = False
    ) -> None:
        super().__init__()
        pooling = pooling or backbone.default_pooling
        if pooling == "cls" and backbone.causal:
            raise ValueError(
                f"pooling='cls' on causal {type(backbone).__name__}: token 0 has seen nothing but itself; "
                "use 'last' (the last real token has seen the whole row) or 'mean'"
            )
        if pooling == "decoder" and not isinstance(backbone, TextEncoderDecoder):
            raise ValueError(f"pooling='decoder' needs an encoder-decoder backbone, not {type(backbone).__name__}")
        self.backbone, self.cfg = backbone, backbone.cfg  # cfg: what checkpoints and optimizers read
        d, p = backbone.cfg.d_model, backbone.cfg.dropout
        self.head = ClassificationHead(d, num_classes, pooling, pooler, dropout=p)
        init_weights(self.head, backbone.cfg)

    def forward(self, *args: Tensor, attention_mask: Tensor | None = None, **kw: Tensor) -> Tensor:
        """Backbone inputs -> (B, num_classes) logits."""
        if self.head.pooling == "decoder":
            ids = args[0] if args else kw["input_ids"]  # (B, S)
            start = torch.full_like(ids[:, :1], DECODER_START_ID)  # (B, 1): one decoder step
            kw = {**kw, "decoder_input_ids": start}
        features = self.backbone.forward_features(
            *args, attention_mask=attention_mask, **kw
        ).last_hidden_state
        return self.head(features, attention_mask)


class TokenClassifier(nn.Module):
    """Any text backbone with one label distribution per token (NER, tagging)."""

    def __init__(self, backbone: nn.Module, num_labels: int) -> None:
        super().__init__()
        self.backbone, self.cfg = backbone, backbone.cfg
        self.head = TokenClassificationHead(backbone.cfg.d_model, num_labels, dropout=backbone.cfg.dropout)
        init_weights(self.head, backbone.cfg)

    def forward(self, *args: Tensor, attention_mask: Tensor | None = None, **kw: Tensor) -> Tensor:
        """Backbone inputs -> (B, T, num_labels) logits; padded positions get logits the loss ignores."""
        features = self.backbone.forward_features(*args, attention_mask=attention_mask, **kw)
        return self.head(features.last_hidden_state)


class CausalLM(TextDecoder):
    """GPT-style decoder-only language model: the TextDecoder backbone with a (tied) LM head."""

    def _add_head(self, cfg: TransformerConfig) -> None:
        """The LM head, sharing the token embedding when the config ties them."""
        self.lm_head = LMHead(cfg, self.embed.tokens)

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


class Seq2SeqLM(TextEncoderDecoder):
    """T5-style encoder-decoder: the TextEncoderDecoder backbone with an LM head on the decoder."""

    def _add_head(self, cfg: TransformerConfig) -> None:
        """The LM head, sharing the token embedding when the config ties them."""
        self.lm_head = LMHead(cfg, self.embed.tokens)

    def forward(
        self,
        input_ids: Tensor,
        decoder_input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> Tensor:
        """(B, S) source, (B, T) target ids -> (B, T, V) logits."""
        features = self.forward_features(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask)
        return self.lm_head(features.last_hidden_state)
