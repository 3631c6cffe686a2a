"""Layer building blocks, and gradients through every norm x placement x activation x position combination."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from tetraformer.core import Block, FeedForward, Seq2SeqLM, TransformerConfig, make_norm
from tetraformer.core.config import Activation, Norm, NormPosition, Position

Config = Callable[..., TransformerConfig]


@pytest.mark.parametrize("position", get_args(Position))
@pytest.mark.parametrize("activation", get_args(Activation))
@pytest.mark.parametrize("norm_position", get_args(NormPosition))
@pytest.mark.parametrize("norm", get_args(Norm))
def test_backward_gives_finite_nonzero_gradients(
    tiny_config: Config, norm: str, norm_position: str, activation: str, position: str
) -> None:
    """Every parameter of a tiny encoder-decoder gets a finite, non-zero gradient from the LM loss."""
    cfg = tiny_config(
        norm=norm, norm_position=norm_position, activation=activation, position=position, n_decoder_layers=2
    )
    model = Seq2SeqLM(cfg).train()
    src, tgt = torch.randint(0, 100, (2, 5)), torch.randint(0, 100, (2, 4))
    src_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    logits = model(src, tgt, src_mask)
    F.cross_entropy(logits.flatten(0, 1), torch.randint(0, 100, (8,))).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name


@pytest.mark.parametrize(
    ("norm", "bias", "kind", "n_params"),
    [
        ("layernorm", True, nn.LayerNorm, 64),
        ("layernorm", False, nn.LayerNorm, 32),
        ("rmsnorm", True, nn.RMSNorm, 32),
    ],
)
def test_make_norm(tiny_config: Config, norm: str, bias: bool, kind: type, n_params: int) -> None:
    """make_norm builds the configured norm over d_model with the config's epsilon and bias."""
    module = make_norm(tiny_config(norm=norm, bias=bias, norm_eps=1e-7))
    assert isinstance(module, kind)
    assert module.eps == 1e-7
    assert sum(p.numel() for p in module.parameters()) == n_params


@pytest.mark.parametrize(
    ("activation", "fn"),
    [
        ("swiglu", F.silu),
        ("geglu", F.gelu),
        ("geglu_tanh", lambda x: F.gelu(x, approximate="tanh")),
        ("relu", F.relu),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
    ],
)
def test_feed_forward_matches_its_formula(tiny_config: Config, activation: str, fn: Callable) -> None:
    """Plain: down(act(up x)); gated: down(act(gate) * value) with gate, value the halves of up x."""
    ffn = FeedForward(tiny_config(activation=activation))
    x = torch.randn(2, 3, 32)
    h = ffn.up(x)
    if ffn.gated:
        assert ffn.up.out_features == 2 * 64
        gate, value = h.chunk(2, dim=-1)
        h = fn(gate) * value
    else:
        h = fn(h)
    assert_close(ffn(x), ffn.down(h))


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_block_residual_placement(tiny_config: Config, norm_position: str) -> None:
    """Pre-norm: x + f(norm(x)) per sub-layer; post-norm: norm(x + f(x)), so outputs are normalised."""
    block = Block(tiny_config(norm_position=norm_position)).eval()
    x = torch.randn(1, 4, 32) * 5 + 3
    attn = block.self_attn
    if norm_position == "pre":
        h = x + attn(block.norm1(x))[0]
        expected = h + block.ffn(block.norm2(h))
    else:
        h = block.norm1(x + attn(x)[0])
        expected = block.norm2(h + block.ffn(h))
    assert_close(block(x)[0], expected)
