"""--model.ensemble: K taggers from their own initial weights, each trained on its own loss, decoded from their
pooled word scores (mean log-probabilities, or mean CRF emissions and tag-to-tag scores); refused beside options
that load or adapt one network, and refused by Hugging Face export."""

from __future__ import annotations

import pytest
import torch

from tasks.token_classification.model import CRFTokenClassifier, build_token_classifier
from tasks.token_classification.module import TokenClassification
from tetraformer.core import TransformerConfig
from tetraformer.core.ensemble import Ensemble
from tetraformer.core.viterbi import constrained_decode
from tetraformer.errors import ConfigError
from tetraformer.interop.convert import export_network
from tetraformer.interop.errors import InteropError

TAGS = 5
CFG = TransformerConfig(vocab_size=40, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16, type_vocab_size=2)


def tagger(crf: bool, ensemble: int, net: torch.nn.Module | None = None) -> TokenClassification:
    """A module holding `net` (or a new network of CFG's shape), as a fit would build it."""
    module = TokenClassification(crf=crf, ensemble=ensemble, arch=CFG)
    module.net = net if net is not None else build_token_classifier(CFG, "encoder", TAGS, crf, ensemble)
    if crf and net is None:  # random CRF scores: zeros would hide a member's scores going missing from the pool
        generator = torch.Generator().manual_seed(1)
        for member in module.members():
            for p in member.crf.parameters():
                p.data.copy_(torch.randn(p.shape, generator=generator))
    return module.eval()


def batch() -> dict[str, torch.Tensor]:
    """Two windows of 6 ids, each its own sentence; every second id starts a word; the second window is padded."""
    generator = torch.Generator().manual_seed(0)
    word_index = torch.tensor([[0, -100, 1, -100, 2, -100], [0, -100, 1, -100, -100, -100]])
    labels = torch.where(word_index >= 0, torch.randint(0, TAGS, (2, 6), generator=generator), -100)
    return {
        "input_ids": torch.randint(1, CFG.vocab_size, (2, 6), generator=generator),
        "attention_mask": torch.tensor([[1] * 6, [1] * 4 + [0] * 2]),
        "token_type_ids": torch.zeros(2, 6, dtype=torch.long),
        "word_index": word_index,
        "sentence": torch.tensor([0, 1]),
        "labels": labels,
    }


def test_members_start_from_their_own_weights() -> None:
    torch.manual_seed(0)
    net = build_token_classifier(CFG, "encoder", TAGS, crf=True, ensemble=3)
    assert isinstance(net, Ensemble) and len(net.members) == 3
    rows = [m.backbone.embed.tokens.weight for m in net.members]
    assert not torch.equal(rows[0], rows[1]) and not torch.equal(rows[1], rows[2])
    assert isinstance(build_token_classifier(CFG, "encoder", TAGS, crf=True), CRFTokenClassifier)  # K = 1: no wrapper


@pytest.mark.parametrize("crf", [False, True])
def test_word_scores_and_decoding_pool_the_members(crf: bool) -> None:
    """The ensemble's word scores are the mean of each member's own (log-probabilities, or CRF emissions), and it
    decodes them with the mean of the members' tag-to-tag scores."""
    torch.manual_seed(0)
    ensemble = tagger(crf, 3)
    alone = [tagger(crf, 1, member) for member in ensemble.members()]
    with torch.no_grad():
        _, pooled = ensemble.word_scores(batch())  # (S, W, L)
        each = torch.stack([single.word_scores(batch())[1] for single in alone])  # (K, S, W, L)
    torch.testing.assert_close(pooled, each.mean(0))
    mask = torch.tensor([[True, True, True], [True, True, False]])
    if crf:
        parts = [single.net.crf.decode_scores(None) for single in alone]
        start, trans, end = (torch.stack(p).mean(0) for p in zip(*parts, strict=True))
        expected = constrained_decode(each.mean(0), mask, trans, start, end)
    else:
        expected = each.mean(0).argmax(-1).masked_fill(~mask, -100)
    assert torch.equal(ensemble.decode_words(pooled, mask), expected)


@pytest.mark.parametrize("crf", [False, True])
def test_each_member_learns_from_its_own_loss(crf: bool) -> None:
    """The ensemble's loss is the mean of the members' losses: a member's gradient is its own loss's over K, and
    no member's output reaches another's gradient."""
    torch.manual_seed(0)
    ensemble = tagger(crf, 2)
    ensemble.loss(ensemble.forward_batch(batch()).float(), batch()).backward()
    for member in ensemble.members():
        pooled = [p.grad.clone() for p in member.parameters()]
        member.zero_grad()
        single = tagger(crf, 1, member)
        single.loss(single.forward_batch(batch()).float(), batch()).backward()
        for got, own in zip(pooled, (p.grad for p in member.parameters()), strict=True):
            torch.testing.assert_close(got, own / 2)


@pytest.mark.parametrize("clash", [{"init_from": "base.ckpt"}, {"lora": {"rank": 4, "save": "merged"}}])
def test_an_ensemble_refuses_options_that_load_or_adapt_one_network(clash: dict, tmp_path) -> None:
    with pytest.raises(ConfigError, match=f"--model.ensemble 2 .*--model.{next(iter(clash))}"):
        TokenClassification(ensemble=2, **clash)
    for bad in (0, -1, 1.5):
        with pytest.raises(ConfigError, match="--model.ensemble"):
            TokenClassification(ensemble=bad)


def test_an_ensemble_does_not_export_to_hugging_face(tmp_path) -> None:
    with pytest.raises(InteropError, match="Ensemble"):
        export_network(build_token_classifier(CFG, "encoder", TAGS, ensemble=2), None, tmp_path / "out")
