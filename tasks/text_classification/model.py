"""A sequence classifier on any text backbone, its pooling checked against the backbone kind."""

from __future__ import annotations

from typing import Literal

from tetraformer.core import SequenceClassifier, TransformerConfig, build_backbone
from tetraformer.core.backbones import BackboneKind
from tetraformer.errors import ConfigError

ClassifierPooling = Literal["cls", "mean", "last", "decoder"]
POOLINGS_BY_BACKBONE: dict[str, tuple[str, ...]] = {
    "encoder": ("cls", "mean", "last"),
    "decoder": ("last", "mean"),  # causal: position 0 has seen only itself
    "encoder_decoder": ("mean", "cls", "decoder"),
}


def build_classifier(
    cfg: TransformerConfig,
    backbone: BackboneKind,
    num_classes: int,
    pooling: ClassifierPooling | None,
    pooler: bool,
) -> SequenceClassifier:
    """A SequenceClassifier on a new backbone; a pooling the backbone cannot use is a clear error."""
    allowed = POOLINGS_BY_BACKBONE.get(backbone)
    if allowed is not None and pooling is not None and pooling not in allowed:
        raise ConfigError(f"--model.pooling {pooling} does not fit a {backbone} backbone; use one of {allowed}")
    return SequenceClassifier(build_backbone(cfg, backbone), num_classes, pooling, pooler)
