"""The one stack: thin Encoder/Decoder wrappers, outputs, named block calls, device-agnostic masks."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import pytest
import torch
from torch import Tensor
from torch.testing import assert_close

from tetraformer.core import Block, CausalLM, Decoder, Encoder, Seq2SeqLM, TransformerConfig
from tetraformer.core.config import Position

POSITIONS = get_args(Position)
Config = Callable[..., TransformerConfig]


def test_wrappers_only_fix_causality_and_cross_attention(tiny_config: Config) -> None:
    """Encoder is bidirectional, Decoder causal, and only a cross Decoder has cross-attention."""
    cfg = tiny_config()
    encoder, decoder, cross = Encoder(cfg), Decoder(cfg), Decoder(cfg, cross_attention=True)
    assert not encoder.causal and decoder.causal and cross.causal
    assert all(layer.cross_attn is None for layer in [*encoder.layers, *decoder.layers])
    assert all(layer.cross_attn is not None for layer in cross.layers)
    assert len(Encoder(cfg, n_layers=3).layers) == 3


def test_stack_output_shapes(tiny_config: Config) -> None:
    """hidden_states hold the input and every layer (last one normed); attentions are per layer."""
    stack = Decoder(tiny_config(n_layers=3), cross_attention=True).eval()
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    out = stack(x, memory=memory, output_hidden_states=True, output_attentions=True)
    assert out.last_hidden_state.shape == (2, 5, 32)
    assert len(out.hidden_states) == 4
    assert out.hidden_states[0] is x
    assert out.hidden_states[-1] is out.last_hidden_state
    assert [w.shape for w in out.attentions] == [(2, 2, 5, 5)] * 3
    assert [w.shape for w in out.cross_attentions] == [(2, 2, 5, 7)] * 3
    plain = stack(x, memory=memory)
    assert plain.hidden_states is None and plain.attentions is None and plain.cross_attentions is None


def test_stack_decoder_is_causal_on_embeddings(tiny_config: Config) -> None:
    """On raw embeddings, perturbing position 3 changes only decoder positions >= 3, but all encoder ones."""
    cfg = tiny_config(position="alibi")
    x = torch.randn(1, 6, 32)
    changed = x.clone()
    changed[:, 3] = torch.randn(32)
    for stack, first_changed in ((Decoder(cfg).eval(), 3), (Encoder(cfg).eval(), 0)):
        delta = (stack(changed).last_hidden_state - stack(x).last_hidden_state).abs().amax(-1)[0]
        assert torch.all(delta[:first_changed] < 1e-6)
        assert torch.all(delta[first_changed:] > 1e-4)


def test_block_takes_everything_but_x_by_name(tiny_config: Config) -> None:
    """Block arguments after x are keyword-only, so a call can never pass a mask where a cache belongs."""
    block = Block(tiny_config()).eval()
    x, mask = torch.randn(1, 4, 32), torch.ones(1, 1, 4, 4, dtype=torch.bool)
    with pytest.raises(TypeError, match="positional"):
        block(x, mask)
    assert_close(block(x, mask=mask)[0], block(x)[0])


def _meta_ids(batch: int, length: int) -> Tensor:
    """Token ids on the meta device."""
    return torch.zeros(batch, length, dtype=torch.long, device="meta")


@pytest.mark.parametrize("position", POSITIONS)
def test_masks_are_built_on_the_input_device(tiny_config: Config, position: str) -> None:
    """Models on a non-CPU device (meta here) never mix in CPU masks: no padding, cache offsets, cross."""
    with torch.device("meta"):
        causal, seq2seq = CausalLM(tiny_config(position=position)), Seq2SeqLM(tiny_config(position=position))
    assert causal(_meta_ids(2, 5)).shape == (2, 5, 100)
    cache = causal.new_cache()
    causal(_meta_ids(2, 3), cache=cache)
    assert causal(_meta_ids(2, 1), cache=cache).shape == (2, 1, 100)
    padding = torch.ones(2, 4, dtype=torch.bool, device="meta")
    memory = seq2seq.encode(_meta_ids(2, 4), padding).last_hidden_state
    assert seq2seq.decode(_meta_ids(2, 3), memory, padding).last_hidden_state.device.type == "meta"
