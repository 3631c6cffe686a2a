"""SDPA equals the eager reference for every mask, position type and cache state; eager weights are sane."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import pytest
import torch
from torch import Tensor, nn
from torch.testing import assert_close

from tetraformer.core import Attention, TransformerConfig
from tetraformer.core.cache import LayerCache
from tetraformer.core.config import Position
from tetraformer.core.masks import combine_masks, mask_to_bias

POSITIONS = get_args(Position)
TOL = dict(atol=1e-5, rtol=0.0)
LEFT_PADDED = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]], dtype=torch.bool)
RIGHT_PADDED = LEFT_PADDED.flip(1)


def _attention_twins(cfg: TransformerConfig, cross: bool = False) -> tuple[Attention, Attention]:
    """An SDPA attention module and an eager one with the same weights."""
    sdpa = Attention(cfg.replace(attention="sdpa"), cross).eval()
    eager = Attention(cfg.replace(attention="eager"), cross).eval()
    eager.load_state_dict(sdpa.state_dict())
    return sdpa, eager


def _self_masks() -> dict[str, tuple[Tensor | None, bool]]:
    """(mask, is_causal) pairs for T = 8: none, padding, causal flag, causal + padding, folded bias."""
    bias = torch.randn(1, 2, 8, 8)
    return {
        "none": (None, False),
        "padding": (combine_masks(RIGHT_PADDED, False, 8, 8), False),
        "causal": (None, True),
        "causal+padding": (combine_masks(LEFT_PADDED, True, 8, 8), False),
        "bias": (bias, False),
        "causal+padding+bias": (mask_to_bias(combine_masks(LEFT_PADDED, True, 8, 8), bias, torch.float32), False),
    }


@pytest.mark.parametrize("kind", list(_self_masks()))
def test_self_attention_sdpa_equals_eager(tiny_config: Callable[..., TransformerConfig], kind: str) -> None:
    """One self-attention layer gives the same output on both backends for each mask kind."""
    sdpa, eager = _attention_twins(tiny_config())
    mask, is_causal = _self_masks()[kind]
    x = torch.randn(2, 8, 32)
    y_sdpa, weights = sdpa(x, mask, is_causal=is_causal)
    y_eager, _ = eager(x, mask, is_causal=is_causal)
    assert weights is None
    assert_close(y_sdpa, y_eager, **TOL)


def test_cross_attention_sdpa_equals_eager(tiny_config: Callable[..., TransformerConfig]) -> None:
    """Cross-attention over a padded memory gives the same output on both backends."""
    sdpa, eager = _attention_twins(tiny_config(), cross=True)
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 8, 32)
    mask = combine_masks(RIGHT_PADDED, False, 5, 8)
    assert_close(sdpa(x, mask, memory=memory)[0], eager(x, mask, memory=memory)[0], **TOL)


@pytest.mark.parametrize("new_tokens", [1, 3])
def test_cached_self_attention_sdpa_equals_eager(
    tiny_config: Callable[..., TransformerConfig], new_tokens: int
) -> None:
    """With 5 cached keys, new queries at an offset agree across backends (causal flag and mask)."""
    sdpa, eager = _attention_twins(tiny_config())
    past, x = torch.randn(2, 5, 32), torch.randn(2, new_tokens, 32)
    total = 5 + new_tokens
    mask = combine_masks(LEFT_PADDED[:, :total], True, new_tokens, total, offset=5)
    outputs = []
    for module in (sdpa, eager):
        cache = LayerCache()
        module(past, is_causal=True, cache=cache)
        outputs.append(module(x, mask, cache=cache)[0])
        assert cache.self_kv[0].shape == (2, 2, total, 16)
    assert_close(outputs[0], outputs[1], **TOL)


def _run_scenario(model: nn.Module, scenario: str, ids: Tensor) -> Tensor:
    """Final hidden states of one mask scenario (see SCENARIOS) on (2, 8) ids."""
    if scenario == "encoder":
        return model(ids).last_hidden_state
    if scenario == "encoder+padding":
        return model(ids, RIGHT_PADDED).last_hidden_state
    if scenario == "causal":
        return model.forward_features(ids).last_hidden_state
    if scenario == "causal+padding":
        return model.forward_features(ids, LEFT_PADDED).last_hidden_state
    if scenario == "cache offset":
        cache = model.new_cache()
        chunks = [ids[:, :4], ids[:, 4:5], ids[:, 5:8]]  # prefill, one token, then a chunk at an offset
        return torch.cat([model.forward_features(c, cache=cache).last_hidden_state for c in chunks], dim=1)
    memory = model.encode(ids, RIGHT_PADDED).last_hidden_state
    if scenario == "cross+memory padding":
        return model.decode(ids[:, :5], memory, RIGHT_PADDED).last_hidden_state
    cache = model.new_cache()  # "cross+cache": cached cross K/V and self K/V at an offset
    chunks = [ids[:, :3], ids[:, 3:4], ids[:, 4:6]]
    return torch.cat([model.decode(c, memory, RIGHT_PADDED, cache=cache).last_hidden_state for c in chunks], 1)


SCENARIOS = {
    "encoder": "encoder",
    "encoder+padding": "encoder",
    "causal": "causal",
    "causal+padding": "causal",
    "cache offset": "causal",
    "cross+memory padding": "seq2seq",
    "cross+cache": "seq2seq",
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("position", POSITIONS)
def test_model_sdpa_equals_eager(
    tiny_model: Callable[..., nn.Module],
    eager_twin: Callable[[nn.Module], nn.Module],
    token_ids: Callable[..., Tensor],
    position: str,
    scenario: str,
) -> None:
    """Whole models agree across backends within 1e-5 (fp32) for every mask scenario and position type."""
    model = tiny_model(SCENARIOS[scenario], position=position, attention="sdpa")
    ids = token_ids(2, 8)
    with torch.no_grad():
        assert_close(_run_scenario(model, scenario, ids), _run_scenario(eager_twin(model), scenario, ids), **TOL)


@pytest.mark.parametrize("position", ["learned", "alibi"])
def test_output_attentions_returns_eager_weights(
    tiny_model: Callable[..., nn.Module], token_ids: Callable[..., Tensor], position: str
) -> None:
    """output_attentions on an SDPA model returns normalised causal weights that ignore padding."""
    model = tiny_model("causal", position=position, attention="sdpa")
    ids = token_ids(2, 8)
    plain = model.forward_features(ids, LEFT_PADDED).last_hidden_state
    out = model.forward_features(ids, LEFT_PADDED, output_attentions=True, output_hidden_states=True)
    assert_close(out.last_hidden_state, plain, **TOL)
    assert len(out.attentions) == 2 and len(out.hidden_states) == 3
    assert out.cross_attentions is None
    for weights in out.attentions:
        assert weights.shape == (2, 2, 8, 8)
        assert_close(weights.sum(-1), torch.ones(2, 2, 8))
        future = torch.ones(8, 8, dtype=torch.bool).triu(1)
        assert torch.all(weights[0][:, future] == 0)
        assert torch.all(weights[1, :, 3:][:, future[3:]] == 0)  # left-pad queries may attend anything
        assert torch.all(weights[1, :, 3:, :3] == 0)  # real queries never attend left pads


def test_seq2seq_cross_attentions_ignore_memory_padding(
    tiny_model: Callable[..., nn.Module], token_ids: Callable[..., Tensor]
) -> None:
    """Decoder cross-attention weights are (B, H, T, S), normalised, and zero on padded memory."""
    model = tiny_model("seq2seq", position="relative")
    src, tgt = token_ids(2, 8), token_ids(2, 4)
    memory = model.encode(src, RIGHT_PADDED).last_hidden_state
    out = model.decode(tgt, memory, RIGHT_PADDED, output_attentions=True)
    for weights in out.cross_attentions:
        assert weights.shape == (2, 2, 4, 8)
        assert_close(weights.sum(-1), torch.ones(2, 2, 4))
        assert torch.all(weights[1, :, :, 5:] == 0)
