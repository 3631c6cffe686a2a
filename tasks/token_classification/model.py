"""A token classifier on any text backbone: bidirectional encoder, or a causal decoder (left context only)."""

from __future__ import annotations

from tetraformer.core import TokenClassifier, TransformerConfig, build_backbone
from tetraformer.core.backbones import BackboneKind


def build_token_classifier(cfg: TransformerConfig, backbone: BackboneKind, num_labels: int) -> TokenClassifier:
    """A TokenClassifier with one output per tag on a new backbone of the given kind.

    A decoder labels each word from the words before it only (no right context); an encoder-decoder labels
    from its encoder's features.
    """
    return TokenClassifier(build_backbone(cfg, backbone), num_labels)
