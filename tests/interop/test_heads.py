"""The pieces head classes share: label vocabulary, classifier dropout, the tanh pooler and its tensors."""

from __future__ import annotations

import torch

from tetraformer.core import TransformerConfig
from tetraformer.interop.heads import (
    classifier_dropout,
    has_pooler,
    labels,
    num_labels,
    pooler_rules,
    tanh_pooler,
)


def test_num_labels_prefers_id2label_then_num_labels_then_two() -> None:
    """transformers' order: the label names decide, else num_labels, else 2."""
    assert num_labels({"id2label": {0: "a", 1: "b", 2: "c"}, "num_labels": 7}) == 3
    assert num_labels({"num_labels": 7}) == 7
    assert num_labels({}) == 2


def test_labels_keep_names_that_fit_else_generic() -> None:
    """The checkpoint's names (keys as strings) when their count fits; LABEL_i otherwise; label2id inverts."""
    named = labels({"id2label": {0: "neg", 1: "pos"}}, 2)
    assert named == {"id2label": {"0": "neg", "1": "pos"}, "label2id": {"neg": 0, "pos": 1}}
    generic = labels({"id2label": {0: "neg", 1: "pos"}}, 3)
    assert generic["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    assert generic["label2id"]["LABEL_2"] == 2


def test_classifier_dropout_falls_back_to_hidden_dropout() -> None:
    """classifier_dropout when set (even 0.0), else the hidden dropout."""
    cfg = TransformerConfig.preset("tiny", dropout=0.3)
    assert classifier_dropout({"classifier_dropout": 0.0}, cfg) == 0.0
    assert classifier_dropout({"classifier_dropout": None}, cfg) == 0.3


def test_tanh_pooler_and_its_rules() -> None:
    """tanh(W x + b); its two tensors map to `{prefix}pooler.dense`."""
    pooler = tanh_pooler(4)
    x = torch.randn(3, 4)
    torch.testing.assert_close(pooler(x), torch.tanh(x @ pooler[0].weight.T + pooler[0].bias))
    rules = pooler_rules("head.pooler", "bert.")
    assert [(r.ours, r.theirs) for r in rules] == [
        ("head.pooler.0.weight", ("bert.pooler.dense.weight",)),
        ("head.pooler.0.bias", ("bert.pooler.dense.bias",)),
    ]
    assert has_pooler({"vit.pooler.dense.weight": x}, "vit.") and not has_pooler({}, "")
