"""A token classifier on any text backbone: bidirectional encoder, or a causal decoder (left context only)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tasks.token_classification.crf import TagTransitions
from tetraformer.core import TokenClassifier, TransformerConfig, build_backbone
from tetraformer.core.backbones import BackboneKind


class CRFTokenClassifier(TokenClassifier):
    """A TokenClassifier whose per-token logits are a linear-chain CRF's emissions, its tag-to-tag scores `crf`.

    It has no Hugging Face counterpart (BertForTokenClassification holds no transition scores), so it does not
    export.
    """

    def __init__(self, backbone: object, num_labels: int) -> None:
        super().__init__(backbone, num_labels)
        self.crf = TagTransitions(num_labels)


class TaggerEnsemble(nn.Module):
    """K token classifiers of one shape, each from its own initial weights, read side by side.

    Each member trains on its own loss over the same batches; the task pools their word scores (the mean of
    their log-probabilities, or of their CRF emissions and tag-to-tag scores). It has no Hugging Face
    counterpart, so it does not export.
    """

    def __init__(self, members: list[TokenClassifier]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.cfg = members[0].cfg

    @property
    def backbone(self) -> nn.Module:
        """The first member's backbone (all members have the same kind)."""
        return self.members[0].backbone

    def forward(self, *args: Tensor, **kw: Tensor) -> Tensor:
        """Backbone inputs -> (K, B, T, num_labels): each member's logits."""
        return torch.stack([member(*args, **kw) for member in self.members])


def build_token_classifier(
    cfg: TransformerConfig, backbone: BackboneKind, num_labels: int, crf: bool = False, ensemble: int = 1
) -> nn.Module:
    """A TokenClassifier (with `crf`, a CRFTokenClassifier) with one output per tag on a new backbone of the kind;
    with `ensemble` K > 1, a TaggerEnsemble of K of them, initialised one after another.

    A decoder labels each word from the words before it only (no right context); an encoder-decoder labels
    from its encoder's features.
    """
    kind = CRFTokenClassifier if crf else TokenClassifier
    members = [kind(build_backbone(cfg, backbone), num_labels) for _ in range(ensemble)]
    return members[0] if ensemble == 1 else TaggerEnsemble(members)
