"""min_entity_prob: an entity is dropped whole when one of its words is under the threshold and kept otherwise; 0
keeps every entity, 1 keeps only certain ones; a decoding pass drops exactly the entities its marginals doubt."""

from __future__ import annotations

import pytest
import torch

from tasks.token_classification.model import build_token_classifier
from tasks.token_classification.module import TokenClassification, drop_unsure_entities
from tetraformer.core import TransformerConfig
from tetraformer.core.viterbi import chain_marginals
from tetraformer.data import LabelVocabulary
from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.spec import DataSpec
from tetraformer.data.tag_schemes import entity_spans
from tetraformer.errors import ConfigError

NAMES = ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
CFG = TransformerConfig(vocab_size=40, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16, type_vocab_size=2)


def tags(ids: list[int]) -> list[str]:
    """Tag names of the real positions of a row."""
    return [NAMES[i] for i in ids if i != IGNORE_INDEX]


def test_an_entity_goes_whole_when_one_word_is_unsure() -> None:
    preds = torch.tensor([[2, 4, 0, 1, IGNORE_INDEX], [1, IGNORE_INDEX, 3, 0, 2]])  # a hole inside row 1's entity
    sure = torch.tensor([[0.9, 0.4, 0.99, 0.95, 0.0], [0.7, 0.0, 0.8, 0.9, 0.3]])
    kept = drop_unsure_entities(preds, sure, 0.5, NAMES, "IOB2")
    assert tags(kept[0].tolist()) == ["O", "O", "O", "B-LOC"]  # B-PER I-PER goes: its second word is 0.4
    assert tags(kept[1].tolist()) == ["B-LOC", "I-LOC", "O", "O"]  # the split B-LOC I-LOC stays, the PER goes
    assert (kept == IGNORE_INDEX).tolist() == (preds == IGNORE_INDEX).tolist()
    assert torch.equal(drop_unsure_entities(preds, sure, 0.0, NAMES, "IOB2"), preds)
    none = drop_unsure_entities(preds, sure, 1.0, NAMES, "IOB2")
    assert all(entity_spans(tags(row), "IOB2") == [] for row in none.tolist())


def tagger(crf: bool, decode: str) -> TokenClassification:
    """A module with a fresh network (random CRF scores with `crf`) and the IOB2 vocabulary of NAMES."""
    torch.manual_seed(0)
    module = TokenClassification(decode=decode, crf=crf, arch=CFG)
    module.net = build_token_classifier(CFG, "encoder", len(NAMES), crf)
    module.spec = DataSpec(labels=LabelVocabulary(NAMES), extras={"scheme": "IOB2"})
    if crf:
        for p in module.net.crf.parameters():
            p.data.copy_(torch.randn(p.shape))
    return module.eval()


@pytest.mark.parametrize(("crf", "decode"), [(False, "argmax"), (False, "constrained"), (True, "constrained")])
def test_decoding_keeps_just_the_entities_its_marginals_are_sure_of(crf: bool, decode: str) -> None:
    """With the threshold, decoding keeps a subset of the entities it finds without, each one whose words' marginals
    (forward-backward over the same chain) are all at least the threshold; random scores leave some doubtful."""
    module = tagger(crf, decode)
    scores = torch.randn(8, 6, len(NAMES), generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    mask = torch.ones(8, 6, dtype=torch.bool)
    mask[3, 4:] = False
    every = module.decode_words(scores, mask)
    module.min_entity_prob = 0.6
    sure = module.decode_words(scores, mask)
    chain = module.decoding_chain(scores.device)
    if chain is None:
        marginals = scores.softmax(-1) * mask.unsqueeze(-1)
    else:
        marginals = chain_marginals(scores, mask, chain[1], chain[0], chain[2])
    kept_all = found_all = 0
    for row in range(8):
        found = set(entity_spans(tags(every[row].tolist()), "IOB2"))
        kept = set(entity_spans(tags(sure[row].tolist()), "IOB2"))
        probs = marginals[row, torch.arange(6), every[row].clamp(min=0)]
        assert kept == {(k, a, b) for k, a, b in found if probs[a:b].min() >= 0.6}
        kept_all, found_all = kept_all + len(kept), found_all + len(found)
    assert 0 < kept_all < found_all


def test_a_threshold_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"min_entity_prob 1.5: must be in \[0, 1\]"):
        TokenClassification(min_entity_prob=1.5)
