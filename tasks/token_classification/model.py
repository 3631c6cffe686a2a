"""A token classifier on any text backbone: bidirectional encoder, or a causal decoder (left context only)."""

from __future__ import annotations

from torch import Tensor

from tasks.token_classification.crf import TagTransitions
from tasks.token_classification.word_features import WordFeatureEmbedding
from tetraformer.core import TokenClassifier, TransformerConfig, build_backbone
from tetraformer.core.backbones import BackboneKind
from tetraformer.core.init import init_weights
from tetraformer.errors import ConfigError


class CRFTokenClassifier(TokenClassifier):
    """A TokenClassifier whose per-token logits are a linear-chain CRF's emissions, its tag-to-tag scores `crf`.

    It has no Hugging Face counterpart (BertForTokenClassification holds no transition scores), so it does not
    export.
    """

    def __init__(self, backbone: object, num_labels: int) -> None:
        super().__init__(backbone, num_labels)
        self.crf = TagTransitions(num_labels)


class FeatureTokenClassifier(TokenClassifier):
    """A tagger on an encoder whose every subword also reads its word's lexical features
    (WordFeatureEmbedding), added to the token embedding before the encoder; with `crf`, CRF scores `crf`."""

    def __init__(self, backbone: object, num_labels: int, feature_rows: int, crf: bool) -> None:
        super().__init__(backbone, num_labels)
        if crf:
            self.crf = TagTransitions(num_labels)
        self.features = WordFeatureEmbedding(feature_rows, backbone.cfg.d_model)
        init_weights(self.features, backbone.cfg)
        self.features.reset_padding()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        word_features: Tensor | None = None,
    ) -> Tensor:
        """(B, T) ids, mask, segments and (B, T, K) feature rows -> (B, T, num_labels) logits."""
        x = self.backbone.embed(input_ids, token_type_ids)  # (B, T, D)
        if word_features is not None:
            x = x + self.features(word_features)  # (B, T, D)
        return self.head(self.backbone.encoder(x, attention_mask).last_hidden_state)


def build_token_classifier(
    cfg: TransformerConfig,
    backbone: BackboneKind,
    num_labels: int,
    crf: bool = False,
    feature_rows: int = 0,
) -> TokenClassifier:
    """A TokenClassifier (with `crf`, a CRFTokenClassifier) with one output per tag on a new backbone of the kind.

    A decoder labels each word from the words before it only (no right context); an encoder-decoder labels
    from its encoder's features. `feature_rows` (the word features' table size): a FeatureTokenClassifier (encoder
    only).
    """
    if feature_rows:
        if backbone != "encoder":
            raise ConfigError(f"--data.word_features needs --model.backbone encoder, not {backbone}")
        return FeatureTokenClassifier(build_backbone(cfg, backbone), num_labels, feature_rows, crf)
    return (CRFTokenClassifier if crf else TokenClassifier)(build_backbone(cfg, backbone), num_labels)
