"""A token classifier on any text backbone: bidirectional encoder, or a causal decoder (left context only)."""

from __future__ import annotations

from torch import nn

from tasks.token_classification.crf import TagTransitions
from tetraformer.core import TokenClassifier, TransformerConfig, build_backbone
from tetraformer.core.backbones import BackboneKind
from tetraformer.core.ensemble import build_ensemble


class CRFTokenClassifier(TokenClassifier):
    """A TokenClassifier whose per-token logits are a linear-chain CRF's emissions, its tag-to-tag scores `crf`.

    It has no Hugging Face counterpart (BertForTokenClassification holds no transition scores), so it does not
    export.
    """

    def __init__(self, backbone: object, num_labels: int) -> None:
        super().__init__(backbone, num_labels)
        self.crf = TagTransitions(num_labels)


def build_token_classifier(
    cfg: TransformerConfig, backbone: BackboneKind, num_labels: int, crf: bool = False, ensemble: int = 1
) -> nn.Module:
    """A TokenClassifier (with `crf`, a CRFTokenClassifier) with one output per tag on a new backbone of the kind;
    with `ensemble` K > 1, an Ensemble of K of them, initialised one after another.

    A decoder labels each word from the words before it only (no right context); an encoder-decoder labels
    from its encoder's features.
    """
    kind = CRFTokenClassifier if crf else TokenClassifier
    return build_ensemble(lambda: kind(build_backbone(cfg, backbone), num_labels), ensemble)
