"""Grouped-query and multi-query attention (n_kv_heads): shapes, the cache, and agreement with repeated heads."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.errors import OptionError

TOL = dict(atol=1e-5, rtol=1e-5)


def config(**overrides: object) -> TransformerConfig:
    """A tiny rotary SwiGLU decoder with 4 query heads."""
    fields = dict(d_model=32, n_heads=4, n_layers=2, d_ff=48, vocab_size=50, max_len=64, position="rotary")
    return TransformerConfig(**{**fields, "norm": "rmsnorm", "activation": "swiglu", "bias": False, **overrides})


def scrambled(cfg: TransformerConfig) -> CausalLM:
    """A model in eval mode with large random weights (outputs depend on every head)."""
    model = CausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def test_kv_projection_and_cache_have_n_kv_heads() -> None:
    """Q keeps n_heads * d_head, K and V n_kv_heads * d_head; the cache holds (B, n_kv_heads, T, d_head)."""
    cfg = config(n_kv_heads=2, d_head=12)
    model = scrambled(cfg)
    assert model.decoder.layers[0].self_attn.qkv.weight.shape == ((4 + 2 * 2) * 12, 32)
    cache = model.new_cache()
    model(torch.randint(0, 50, (3, 5)), cache=cache)
    k, v = cache.layers[0].self_kv
    assert k.shape == v.shape == (3, 2, 5, 12)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
@pytest.mark.parametrize("backend", ["sdpa", "eager"])
def test_cached_decoding_equals_the_full_forward(n_kv_heads: int, backend: str) -> None:
    """Logits of a prompt then one token at a time on the cache equal one forward over the whole sequence."""
    model = scrambled(config(n_kv_heads=n_kv_heads, attention=backend))
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache()
        steps = [model(ids[:, :5], cache=cache)] + [model(ids[:, i : i + 1], cache=cache) for i in range(5, 9)]
    assert_close(torch.cat(steps, dim=1), full, **TOL)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_grouped_heads_equal_full_heads_with_repeated_key_value_weights(n_kv_heads: int) -> None:
    """A GQA model equals the n_heads model whose K/V weights repeat each key/value head for its query group."""
    gqa = scrambled(config(n_kv_heads=n_kv_heads))
    full = CausalLM(config()).eval()
    state, groups, dh = gqa.state_dict(), 4 // n_kv_heads, 8
    for key, value in state.items():
        if key.endswith("qkv.weight"):
            q, k, v = value.split((4 * dh, n_kv_heads * dh, n_kv_heads * dh))
            k, v = (t.unflatten(0, (n_kv_heads, dh)).repeat_interleave(groups, 0).flatten(0, 1) for t in (k, v))
            state[key] = torch.cat((q, k, v))
    full.load_state_dict(state)
    ids = torch.randint(0, 50, (2, 7))
    mask = torch.tensor([[1] * 7, [0, 0, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        assert_close(gqa(ids, mask), full(ids, mask), **TOL)


def test_n_kv_heads_equal_to_n_heads_is_the_default_model() -> None:
    """n_kv_heads == n_heads builds the same parameters and the same outputs as leaving it unset."""
    old = scrambled(config())
    same = CausalLM(config(n_kv_heads=4)).eval()
    same.load_state_dict(old.state_dict())
    ids = torch.randint(0, 50, (2, 6))
    with torch.no_grad():
        assert torch.equal(old(ids), same(ids))


def test_n_kv_heads_must_divide_n_heads() -> None:
    """An n_kv_heads that does not divide n_heads is an error naming both."""
    with pytest.raises(OptionError, match=r"n_kv_heads.*3.*must divide n_heads=4"):
        config(n_kv_heads=3)
