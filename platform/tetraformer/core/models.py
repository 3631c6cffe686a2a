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
from tetraformer.core.heads import (
    ClassificationHead,
    LMHead,
    MaskedLMHead,
    Pooling,
    TokenClassificationHead,
)
from tetraformer.core.init import init_weights

DECODER_START_ID = 0  # the pad id of the project's tokenizers, T5's decoder start convention

__all__ = [
    "CausalLM",
    "ImageEncoder",
    "MaskedLM",
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
        features = self.backbone.forward_features(*args, attention_mask=attention_mask, **kw).last_hidden_state
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


class MaskedLM(nn.Module):
    """BERT pretraining: a TextEncoder, the masked-LM head (tied when the config ties) and optionally NSP.

    The NSP head is BERT's: a tanh pooler over [CLS] and a 2-way linear (0 = B follows A, 1 = B is random).
    """

    def __init__(self, backbone: TextEncoder, next_sentence: bool = False) -> None:
        super().__init__()
        cfg = backbone.cfg
        self.backbone = backbone
        self.head = MaskedLMHead(cfg)  # untied while initialised, so a given backbone keeps its embedding
        self.nsp = ClassificationHead(cfg.d_model, 2, "cls", pooler=True) if next_sentence else None
        init_weights(self.head, cfg)
        if self.nsp is not None:
            init_weights(self.nsp, cfg)
        if cfg.tie_embeddings:
            self.head.proj.weight = backbone.embed.tokens.weight

    @property
    def cfg(self) -> TransformerConfig:
        """The backbone's config."""
        return self.backbone.cfg

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """(B, T) ids, real-token mask and segment ids -> (B, T, V) logits."""
        return self.pretraining_logits(input_ids, attention_mask, token_type_ids)[0]

    def pretraining_logits(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """MLM logits and NSP logits of one encoder pass.

        MLM logits are (B, T, V), or (N, V) at the N True entries of a (B, T) `positions` mask (the vocabulary
        projection of unmasked tokens is then skipped); NSP logits are (B, 2), None without the NSP head.
        """
        h = self.backbone.forward_features(input_ids, attention_mask, token_type_ids).last_hidden_state
        mlm = self.head(h if positions is None else h[positions])  # (B, T, V) | (N, V)
        return mlm, self.nsp(h, attention_mask) if self.nsp is not None else None


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
        document_ids: Tensor | None = None,
        features_only: bool = False,
    ) -> Tensor:
        """(B, T) ids -> (B, T, V) next-token logits, or the (B, T, D) states the head takes with features_only;
        (B, T) document_ids keep packed examples apart."""
        kw = {"document_ids": document_ids} if document_ids is not None else {}
        h = self.forward_features(input_ids, attention_mask, cache, position_ids, **kw).last_hidden_state
        return h if features_only else self.lm_head(h)


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
        features_only: bool = False,
    ) -> Tensor:
        """(B, S) source, (B, T) target ids -> (B, T, V) logits, or the (B, T, D) states the head takes with
        features_only."""
        features = self.forward_features(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask)
        h = features.last_hidden_state
        return h if features_only else self.lm_head(h)
