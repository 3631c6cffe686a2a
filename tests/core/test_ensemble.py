"""Ensemble: K networks from their own initial weights, outputs stacked on a new first dimension."""

from __future__ import annotations

import torch
from torch import nn

from tetraformer.core import SequenceClassifier, TransformerConfig, build_backbone
from tetraformer.core.ensemble import Ensemble, build_ensemble, ensemble_members, member_outputs

CFG = TransformerConfig(vocab_size=30, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8, type_vocab_size=2)


def classifier() -> SequenceClassifier:
    """A new 3-class classifier on a new encoder."""
    return SequenceClassifier(build_backbone(CFG, "encoder"), 3, "mean", False)


def test_size_one_is_the_network_itself() -> None:
    net = build_ensemble(classifier, 1)
    assert isinstance(net, SequenceClassifier) and ensemble_members(net) == [net]
    ids = torch.randint(1, CFG.vocab_size, (2, 5))
    torch.testing.assert_close(member_outputs(net.eval(), ids), net(ids).unsqueeze(0))


def test_members_start_apart_and_stack_their_outputs() -> None:
    torch.manual_seed(0)
    net = build_ensemble(classifier, 3).eval()
    assert isinstance(net, Ensemble) and len(ensemble_members(net)) == 3 and net.cfg == CFG
    assert net.backbone is net.members[0].backbone
    weights = [m.backbone.embed.tokens.weight for m in net.members]
    assert not torch.allclose(weights[0], weights[1]) and not torch.allclose(weights[1], weights[2])
    ids, mask = torch.randint(1, CFG.vocab_size, (2, 5)), torch.tensor([[1] * 5, [1] * 3 + [0] * 2])
    out = member_outputs(net, ids, attention_mask=mask)  # (K, B, C)
    assert out.shape == (3, 2, 3)
    for k, member in enumerate(net.members):
        torch.testing.assert_close(out[k], member(ids, attention_mask=mask))


def test_a_members_gradient_comes_from_its_own_output_only() -> None:
    net = build_ensemble(classifier, 2)
    ids = torch.randint(1, CFG.vocab_size, (2, 5))
    member_outputs(net, ids)[0].sum().backward()
    first, second = (m.head.classifier.weight.grad for m in net.members)  # type: ignore[union-attr]
    assert first is not None and first.abs().sum() > 0 and (second is None or not second.any())


def test_ensemble_is_a_module_list_of_members() -> None:
    net = build_ensemble(classifier, 2)
    assert isinstance(net.members, nn.ModuleList)
    assert sum(p.numel() for p in net.parameters()) == 2 * sum(p.numel() for p in classifier().parameters())
