"""The tag CRF: its partition function and sequence scores match enumerating every tag sequence, skipped positions
included; Viterbi over its scores finds the best sequence; a CRF tagger refuses Hugging Face export and trains its
CRF in full under LoRA."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch

from tasks.token_classification.crf import TagTransitions
from tasks.token_classification.model import build_token_classifier
from tasks.token_classification.module import TokenClassification
from tetraformer.core import TransformerConfig
from tetraformer.core.lora import LoRAConfig
from tetraformer.core.viterbi import constrained_decode
from tetraformer.interop.convert import export_network
from tetraformer.interop.errors import InteropError
from tetraformer.training.base.lora_runs import LoRARun

MASKS = [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 1], [0, 1, 1, 0]]  # a prefix, holes, a late start


def random_crf(n_tags: int, seed: int) -> TagTransitions:
    """A CRF with random scores (zero scores would hide a transposed matrix)."""
    crf = TagTransitions(n_tags)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in crf.parameters():
            p.copy_(torch.randn(p.shape, generator=generator))
    return crf


def brute_scores(crf: TagTransitions, emissions: torch.Tensor, mask: list[int]) -> dict[tuple[int, ...], float]:
    """Every tag sequence over the masked positions of one sentence (W, L) and its score, by the definition."""
    positions = [t for t, m in enumerate(mask) if m]
    out = {}
    for tags in itertools.product(range(emissions.shape[1]), repeat=len(positions)):
        score = (
            crf.start[tags[0]] + crf.end[tags[-1]] + sum(emissions[t, k] for t, k in zip(positions, tags, strict=True))
        )
        score = score + sum(crf.trans[a, b] for a, b in itertools.pairwise(tags))
        out[tags] = float(score)
    return out


@pytest.mark.parametrize("mask", MASKS)
def test_likelihood_matches_enumerating_every_sequence(mask: list[int]) -> None:
    crf = random_crf(3, 0)
    emissions = torch.randn(1, 4, 3, generator=torch.Generator().manual_seed(1))  # (S, W, L)
    scores = brute_scores(crf, emissions[0], mask)
    keep = torch.tensor([mask], dtype=torch.bool)
    assert crf.log_partition(emissions, keep).item() == pytest.approx(
        torch.logsumexp(torch.tensor(list(scores.values())), 0).item(), abs=1e-5
    )
    gold = (2, 0, 1, 1)[: sum(mask)]
    tags = torch.full((1, 4), -100)
    tags[keep] = torch.tensor(gold)
    assert crf.sequence_score(emissions, tags, keep).item() == pytest.approx(scores[gold], abs=1e-5)
    nll = crf.negative_log_likelihood(emissions, tags, keep)
    assert nll.item() > 0
    nll.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in crf.parameters())


def test_a_batch_scores_each_sentence_alone() -> None:
    """Sentences of a batch with different masks score as each does alone; a sentence with no word scores 0."""
    crf = random_crf(4, 2)
    emissions = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(3))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    together = crf.log_partition(emissions, mask)
    for i in range(2):
        assert together[i].item() == pytest.approx(crf.log_partition(emissions[i : i + 1], mask[i : i + 1]).item())
    assert together[2].item() == 0


@pytest.mark.parametrize("mask", MASKS)
def test_viterbi_over_the_learned_scores_finds_the_best_sequence(mask: list[int]) -> None:
    crf = random_crf(3, 4)
    emissions = torch.randn(1, 4, 3, generator=torch.Generator().manual_seed(5))
    scores = brute_scores(crf, emissions[0], mask)
    best = max(scores, key=scores.get)
    start, trans, end = crf.decode_scores(None)
    keep = torch.tensor([mask], dtype=torch.bool)
    decoded = constrained_decode(emissions, keep, trans, start, end)
    assert tuple(decoded[keep].tolist()) == best
    if len(best) > 1:  # forbid the best sequence's first step: the best legal sequence wins instead
        forbid = torch.ones(3, 3, dtype=torch.bool)
        forbid[best[0], best[1]] = False
        yes = torch.ones(3, dtype=torch.bool)
        start, trans, end = crf.decode_scores((yes, forbid, yes))
        constrained = constrained_decode(emissions, keep, trans, start, end)
        legal = {k: v for k, v in scores.items() if all(forbid[a, b] for a, b in itertools.pairwise(k))}
        assert tuple(constrained[keep].tolist()) == max(legal, key=legal.get) != best


def test_a_crf_tagger_does_not_export_to_hugging_face(tmp_path) -> None:
    cfg = TransformerConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16, type_vocab_size=2)
    with pytest.raises(InteropError, match="CRFTokenClassifier"):
        export_network(build_token_classifier(cfg, "encoder", 5, crf=True), None, tmp_path / "out")


def test_under_lora_the_crf_trains_in_full_with_the_head() -> None:
    """LoRA freezes the encoder's weights; the tagging head and the CRF's scores, new to the base, train."""
    cfg = TransformerConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16, type_vocab_size=2)
    net = build_token_classifier(cfg, "encoder", 5, crf=True)
    parts = TokenClassification(crf=True).fresh_parts
    assert parts == ("head", "crf") and TokenClassification().fresh_parts == ("head",)
    module = SimpleNamespace(init_from="base.ckpt", lora_trains_head=True, fresh_parts=parts)
    LoRARun(LoRAConfig(rank=2)).adapt(module, net)
    trainable = {name.split(".")[0] for name, p in net.named_parameters() if p.requires_grad}
    assert {"head", "crf"} <= trainable
    assert not any(p.requires_grad for name, p in net.backbone.named_parameters() if "lora_" not in name)
