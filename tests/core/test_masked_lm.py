"""MaskedLM: a backbone with the tied masked-LM head and BERT's optional NSP head."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor
from torch.testing import assert_close

from tetraformer.core import MaskedLM, TransformerConfig, build_backbone

Ids = Callable[..., Tensor]


def test_head_is_tied_and_a_given_backbone_keeps_its_weights(
    tiny_config: Callable[..., TransformerConfig],
) -> None:
    """Tied: the projection is the token embedding, and building the model does not re-initialise it."""
    backbone = build_backbone(tiny_config(type_vocab_size=2), "encoder")
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    model = MaskedLM(backbone, next_sentence=True)
    assert model.head.proj.weight is backbone.embed.tokens.weight
    assert all(torch.equal(before[k], v) for k, v in backbone.state_dict().items())
    untied = MaskedLM(build_backbone(tiny_config(tie_embeddings=False), "encoder"))
    assert untied.head.proj.weight is not untied.backbone.embed.tokens.weight


def test_masked_positions_give_the_full_logits_there(
    tiny_config: Callable[..., TransformerConfig], token_ids: Ids
) -> None:
    """Logits at a (B, T) mask of positions equal the full (B, T, V) logits indexed there; NSP is (B, 2)."""
    model = MaskedLM(build_backbone(tiny_config(type_vocab_size=2), "encoder"), next_sentence=True).eval()
    ids = token_ids(3, 10)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[2, 6:] = False
    types = (torch.arange(10) >= 5).long().expand(3, -1)
    positions = torch.rand(3, 10) < 0.3
    full, nsp = model.pretraining_logits(ids, mask, types)
    picked, _ = model.pretraining_logits(ids, mask, types, positions=positions)
    assert full.shape == (3, 10, model.cfg.vocab_size) and nsp.shape == (3, 2)
    assert_close(picked, full[positions], atol=1e-5, rtol=0)
    assert_close(model(ids, mask, types), full)


@pytest.mark.parametrize("next_sentence", [False, True])
def test_nsp_head_only_when_asked(
    tiny_config: Callable[..., TransformerConfig], token_ids: Ids, next_sentence: bool
) -> None:
    """Without NSP there are no NSP weights and no NSP logits."""
    model = MaskedLM(build_backbone(tiny_config(type_vocab_size=2), "encoder"), next_sentence=next_sentence)
    _, nsp = model.pretraining_logits(token_ids(2, 6))
    assert (nsp is not None) == next_sentence
    assert any(k.startswith("nsp.") for k in model.state_dict()) == next_sentence
