"""Sliding-window attention: the mask, cached decoding equal to the full forward, a cache bounded by the window."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tetraformer.core import CausalLM, GenerationConfig, TransformerConfig, generate
from tetraformer.core.masks import causal_mask

TOL = dict(atol=1e-5, rtol=1e-5)


def scrambled(**overrides: object) -> CausalLM:
    """A tiny rotary GQA decoder with a 4-position window, large random weights, eval mode."""
    cfg = TransformerConfig.preset(
        "tiny", position="rotary", n_heads=4, n_kv_heads=2, sliding_window=4, max_len=256, **overrides
    )
    model = CausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def test_mask_sees_the_window_latest_positions() -> None:
    """Query i sees keys i-3..i with window 4 (itself included), and never a later one."""
    mask = causal_mask(8, 8, window=4)
    for i in range(8):
        assert mask[i].nonzero().flatten().tolist() == list(range(max(0, i - 3), i + 1))


def test_window_changes_outputs_only_past_the_window() -> None:
    """Logits equal the unwindowed model's for the first 4 positions and differ after them."""
    windowed = scrambled()
    full = CausalLM(windowed.cfg.replace(sliding_window=None)).eval()
    full.load_state_dict(windowed.state_dict())
    ids = torch.randint(0, 100, (2, 10))
    with torch.no_grad():
        a, b = windowed(ids), full(ids)
    assert_close(a[:, :4], b[:, :4], **TOL)
    assert not torch.allclose(a[:, 4:], b[:, 4:], atol=1e-3)


@pytest.mark.parametrize("chunks", [(10, 1, 1, 1, 1), (3, 1, 1, 5, 2, 1), (1,) * 14])
@pytest.mark.parametrize("backend", ["sdpa", "eager"])
def test_cached_decoding_equals_the_full_forward(chunks: tuple[int, ...], backend: str) -> None:
    """Feeding the sequence in chunks through the cache gives the full forward's logits; with padding too."""
    model = scrambled(attention=backend)
    ids = torch.randint(0, 100, (2, sum(chunks)))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # a left-padded row
    with torch.no_grad():
        full = model(ids, mask)
        cache, outs, start = model.new_cache(), [], 0
        for n in chunks:
            outs.append(model(ids[:, start : start + n], mask[:, : start + n], cache=cache))
            start += n
    real = mask.bool()
    assert_close(torch.cat(outs, dim=1)[real], full[real], **TOL)


def test_cache_keeps_only_the_window() -> None:
    """Decoding 60 tokens after a 10-token prompt holds at most max(prompt, two windows) slots per layer."""
    model = scrambled()
    cache = model.new_cache().reserve(70)
    with torch.no_grad():
        model(torch.randint(0, 100, (1, 10)), cache=cache)
        for _ in range(60):
            model(torch.randint(0, 100, (1, 1)), cache=cache)
    layer = cache.layers[0]
    assert layer.slots <= max(10, 2 * 4) and layer.self_kv[0].shape[:2] == (1, 2)


def test_generation_on_the_window_cache_equals_uncached_greedy() -> None:
    """Greedy ids from the windowed cache equal argmax of the full forward at every step."""
    model = scrambled()
    prompt = torch.randint(0, 100, (2, 5))
    out = generate(model, prompt, None, GenerationConfig(max_new_tokens=12, do_sample=False, eos_token_id=None))
    seq = prompt
    with torch.no_grad():
        for _ in range(12):
            seq = torch.cat((seq, model(seq)[:, -1:].argmax(-1)), dim=1)
    assert torch.equal(out, seq)
