"""The image classifier: a ViT backbone (patches, [CLS], encoder) with a pooled classification head."""

from __future__ import annotations

from typing import Literal

from tetraformer.core import ImageEncoder, SequenceClassifier, TransformerConfig

ImagePooling = Literal["cls", "mean"]


def build_image_classifier(cfg: TransformerConfig, num_classes: int, pooling: ImagePooling) -> SequenceClassifier:
    """A SequenceClassifier on a new ImageEncoder, reading the final [CLS] state or the mean over all
    positions."""
    return SequenceClassifier(ImageEncoder(cfg), num_classes, pooling, pooler=False)
