"""A sequence classifier on any text backbone, its pooling checked against the backbone kind."""

from __future__ import annotations

from typing import Literal

from tetraformer.core import SequenceClassifier, TransformerConfig, build_backbone
from tetraformer.core.backbones import BackboneKind
from tetraformer.errors import require

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
    check_pooling(SequenceClassifier, backbone, pooling)
    return SequenceClassifier(build_backbone(cfg, backbone), num_classes, pooling, pooler)


def check_pooling(owner: object, backbone: BackboneKind, pooling: ClassifierPooling | None) -> None:
    """A pooling the backbone cannot use is an OptionError (of `owner`'s `pooling`) naming those it can."""
    allowed = POOLINGS_BY_BACKBONE.get(backbone, ())
    fits = pooling is None or not allowed or pooling in allowed
    require(owner, "pooling", pooling, fits, f"does not fit a {backbone} backbone; use one of: {', '.join(allowed)}")
