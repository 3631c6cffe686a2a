"""Attention maps: rollout properties, [CLS] patch grids, and weights taken without changing the outputs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from tetraformer.core import SequenceClassifier
from tetraformer.core.attention_maps import (
    attention_rollout,
    backbone_of,
    cls_patch_map,
    image_attentions,
    patch_grid,
    text_attentions,
)


def softmax_weights(layers: int, batch: int = 2, heads: int = 2, t: int = 5) -> list[torch.Tensor]:
    """Random row-stochastic attention weights, one (B, H, T, T) per layer."""
    return [torch.randn(batch, heads, t, t).softmax(-1) for _ in range(layers)]


@pytest.mark.parametrize("residual", [True, False])
def test_rollout_of_identity_attention_is_the_identity(residual: bool) -> None:
    eye = torch.eye(6).expand(2, 3, 6, 6)  # (B, H, T, T): every token attends to itself only
    rollout = attention_rollout([eye] * 4, residual=residual)
    torch.testing.assert_close(rollout, torch.eye(6).expand(2, 6, 6))


def test_rollout_of_uniform_attention_without_residual_is_uniform() -> None:
    uniform = torch.full((1, 2, 5, 5), 0.2)
    torch.testing.assert_close(attention_rollout([uniform] * 3, residual=False), torch.full((1, 5, 5), 0.2))


def test_rollout_of_uniform_attention_with_residual_keeps_a_share_of_the_identity() -> None:
    layers, t = 3, 5
    uniform = torch.full((1, 2, t, t), 1 / t)
    keep = 0.5**layers  # each layer keeps half of a token on itself: (I + U) / 2 multiplied L times
    expected = (1 - keep) * torch.full((t, t), 1 / t) + keep * torch.eye(t)
    torch.testing.assert_close(attention_rollout([uniform] * layers)[0], expected)


def test_rollout_rows_are_distributions_and_one_layer_is_the_head_mean() -> None:
    weights = softmax_weights(3)
    for residual in (True, False):
        torch.testing.assert_close(attention_rollout(weights, residual).sum(-1), torch.ones(2, 5))
    torch.testing.assert_close(attention_rollout(weights[:1], residual=False), weights[0].mean(1))


def test_rollout_needs_a_layer() -> None:
    with pytest.raises(ValueError, match="at least one layer"):
        attention_rollout([])


def test_cls_patch_map_takes_row_zero_over_the_patches() -> None:
    attention = torch.arange(3 * 7 * 7, dtype=torch.float).reshape(3, 7, 7)  # (H, 1 + 6, 1 + 6)
    grid = cls_patch_map(attention, (2, 3))
    assert grid.shape == (3, 2, 3)
    torch.testing.assert_close(grid[1, 1], attention[1, 0, 4:7])
    with pytest.raises(ValueError, match="3x3 patch grid"):
        cls_patch_map(attention, (3, 3))


def test_backbone_of_task_networks_and_language_models(tiny_model: Callable[..., nn.Module]) -> None:
    encoder, causal = tiny_model("encoder"), tiny_model("causal")
    assert backbone_of(SequenceClassifier(encoder, 3)) is encoder
    assert backbone_of(causal) is causal


def test_image_maps_come_from_sdpa_models_without_changing_outputs(tiny_model: Callable[..., nn.Module]) -> None:
    vit = tiny_model("image", attention="sdpa")
    pixels = torch.randn(2, 3, 32, 32)
    weights = image_attentions(vit, pixels)
    assert patch_grid(vit, pixels) == (4, 4)
    assert len(weights) == 2 and weights[-1].shape == (2, 2, 17, 17)
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(2, 2, 17))
    with torch.no_grad():
        plain = vit.forward_features(pixels).last_hidden_state
        traced = vit.forward_features(pixels, output_attentions=True).last_hidden_state
    torch.testing.assert_close(traced, plain)


@pytest.mark.parametrize("family", ["encoder", "causal"])
def test_text_maps_rows_sum_to_one_and_padding_gets_none(
    tiny_model: Callable[..., nn.Module], token_ids: Callable[..., torch.Tensor], family: str
) -> None:
    model = tiny_model(family, attention="sdpa")
    ids, mask = token_ids(2, 6), torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False
    (weights,) = text_attentions(model, ids, mask).values()
    assert len(weights) == 2 and weights[0].shape == (2, 2, 6, 6)
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(2, 2, 6))
    assert weights[1][1, :, :, 4:].abs().max() == 0
    if family == "causal":
        assert weights[0][0].triu(1).abs().max() == 0  # no token looks ahead


def test_encoder_decoder_maps_have_decoder_and_cross_kinds(
    tiny_model: Callable[..., nn.Module], token_ids: Callable[..., torch.Tensor]
) -> None:
    model = tiny_model("seq2seq", attention="sdpa")
    source, target = token_ids(1, 7), token_ids(1, 4)
    assert set(text_attentions(model, source)) == {"self"}
    maps = text_attentions(model, source, decoder_input_ids=target)
    assert maps["self"][0].shape == (1, 2, 7, 7)
    assert maps["decoder"][0].shape == (1, 2, 4, 4)
    assert maps["cross"][-1].shape == (1, 2, 4, 7)
    torch.testing.assert_close(maps["cross"][0].sum(-1), torch.ones(1, 2, 4))
    with torch.no_grad():
        torch.testing.assert_close(
            model.forward_features(source, decoder_input_ids=target, output_attentions=True).last_hidden_state,
            model.forward_features(source, decoder_input_ids=target).last_hidden_state,
        )
