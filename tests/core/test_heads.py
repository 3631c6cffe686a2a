"""Heads on backbone features: tied LM heads, pooling that ignores padding, per-token classifiers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor, nn
from torch.testing import assert_close

from tetraformer.core import (
    ClassificationHead,
    LMHead,
    MaskedLMHead,
    SequenceClassifier,
    TextEncoder,
    TokenClassificationHead,
    TransformerConfig,
)

Config = Callable[..., TransformerConfig]


def test_lm_head_ties_and_rescales(tiny_config: Config) -> None:
    """A tied head shares the embedding matrix; T5's rescaling multiplies hidden states by d^-0.5."""
    embedding = nn.Embedding(100, 32)
    head = LMHead(tiny_config(rescale_tied_logits=True), embedding)
    assert head.proj.weight is embedding.weight
    h = torch.randn(2, 3, 32)
    assert_close(head(h), (h * 32**-0.5) @ embedding.weight.T)
    untied = LMHead(tiny_config(tie_embeddings=False, rescale_tied_logits=True), embedding)
    assert untied.proj.weight is not embedding.weight
    assert_close(untied(h), h @ untied.proj.weight.T)


def test_masked_lm_head_is_tied_with_its_own_bias(tiny_config: Config) -> None:
    """BERT's MLM head projects through the tied embedding and adds a vocabulary bias."""
    embedding = nn.Embedding(100, 32)
    head = MaskedLMHead(tiny_config(), embedding)
    assert head.proj.weight is embedding.weight
    assert head.proj.bias.shape == (100,)
    assert head(torch.randn(2, 3, 32)).shape == (2, 3, 100)


def test_classification_head_pooling() -> None:
    """cls pooling reads position 0; mean pooling averages real tokens only."""
    h, mask = torch.randn(2, 5, 32), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    cls_head, mean_head = ClassificationHead(32, 3), ClassificationHead(32, 3, pooling="mean")
    assert_close(cls_head(h), cls_head.classifier(h[:, 0]))
    expected = torch.stack((h[0].mean(0), h[1, :2].mean(0)))
    assert_close(mean_head(h, mask), mean_head.classifier(expected))


def test_last_pooling_reads_the_last_real_token_of_any_padding() -> None:
    """last pooling finds each row's last real token from the mask: right-, left- and unpadded rows alike;
    without a mask it reads the last position."""
    h = torch.randn(3, 5, 32)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [0, 1, 1, 1, 0]])  # right, left, both sides
    head = ClassificationHead(32, 3, pooling="last")
    assert_close(head(h, mask), head.classifier(torch.stack((h[0, 2], h[1, 4], h[2, 3]))))
    assert_close(head(h), head.classifier(h[:, -1]))


def test_classification_head_rejects_unknown_pooling() -> None:
    """Only cls, mean, last and decoder pooling exist; the error lists them."""
    with pytest.raises(ValueError, match=r"pooling='max'; expected one of \('cls', 'mean', 'last', 'decoder'\)"):
        ClassificationHead(32, 3, pooling="max")


def test_token_classification_head_shape() -> None:
    """One label distribution per token."""
    assert TokenClassificationHead(32, 7)(torch.randn(2, 5, 32)).shape == (2, 5, 7)


@pytest.mark.parametrize("pooling", ["cls", "mean", "last"])
def test_sequence_classifier_ignores_padding(
    tiny_config: Config, token_ids: Callable[..., Tensor], pooling: str
) -> None:
    """A right-padded row (garbage pads, masked) is classified exactly as the row alone."""
    model = SequenceClassifier(TextEncoder(tiny_config()), 4, pooling=pooling, pooler=True).eval()
    ids = token_ids(2, 7)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])  # integer masks, as tokenizers return them
    logits = model(ids, attention_mask=mask)
    alone = model(ids[1:, :4], attention_mask=mask[1:, :4])
    assert_close(logits[1], alone[0], atol=1e-5, rtol=0.0)
