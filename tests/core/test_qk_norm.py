"""qk_norm: each head's queries and keys normalised over d_head (Qwen3), with a head size apart from d_model."""

from __future__ import annotations

import torch
from torch import nn
from torch.testing import assert_close

from tetraformer.core import CausalLM, TransformerConfig


def test_qk_norm_normalises_each_head_before_attention() -> None:
    """The norms are over d_head; scaling the Q/K projections leaves outputs unchanged (RMSNorm undoes it)."""
    cfg = TransformerConfig.preset("tiny", position="rotary", norm="rmsnorm", bias=False, qk_norm=True, d_head=24)
    model = CausalLM(cfg).eval()
    attn = model.decoder.layers[0].self_attn
    assert isinstance(attn.q_norm, nn.RMSNorm) and attn.q_norm.normalized_shape == (24,)
    ids = torch.randint(0, 100, (2, 7))
    with torch.no_grad():
        before = model(ids)
        for layer in model.decoder.layers:
            layer.self_attn.qkv.weight[: 2 * 24 * 2] *= 5.0  # Q and K rows (2 heads each, d_head 24)
        after = model(ids)
    assert_close(after, before, atol=1e-4, rtol=1e-4)


def test_cached_decoding_with_qk_norm_equals_the_full_forward() -> None:
    """Token-by-token logits on the cache equal the full forward's."""
    cfg = TransformerConfig.preset("tiny", position="rotary", norm="rmsnorm", qk_norm=True, n_kv_heads=1)
    model = CausalLM(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    with torch.no_grad():
        full, cache = model(ids), model.new_cache()
        steps = [model(ids[:, i : i + 1], cache=cache) for i in range(8)]
    assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
