"""build_backbone and the backbone interface: one forward_features call for every kind, unchanged LM keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor
from torch.testing import assert_close

from tetraformer.core import (
    BACKBONE_KINDS,
    CausalLM,
    Seq2SeqLM,
    TextDecoder,
    TextEncoder,
    TextEncoderDecoder,
    TransformerConfig,
    build_backbone,
)

Config = Callable[..., TransformerConfig]
Ids = Callable[..., Tensor]
KINDS = {"encoder": TextEncoder, "decoder": TextDecoder, "encoder_decoder": TextEncoderDecoder}


@pytest.mark.parametrize("kind", BACKBONE_KINDS)
def test_every_kind_builds_and_answers_the_same_call(tiny_config: Config, token_ids: Ids, kind: str) -> None:
    """Each kind is its backbone class, says whether it is causal, and maps (ids, mask) to (B, T, D)."""
    backbone = build_backbone(tiny_config(), kind).eval()
    assert type(backbone) is KINDS[kind]
    assert backbone.causal == (kind == "decoder")
    ids, mask = token_ids(2, 7), torch.ones(2, 7, dtype=torch.bool)
    assert backbone.forward_features(ids, attention_mask=mask).last_hidden_state.shape == (2, 7, 32)


def test_unknown_kind_lists_the_kinds(tiny_config: Config) -> None:
    """A misspelt kind is a ValueError naming every kind."""
    with pytest.raises(ValueError, match="'encoder', 'decoder', 'encoder_decoder'"):
        build_backbone(tiny_config(), "seq2seq")


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_single_stack_kinds_refuse_decoder_layers(tiny_config: Config, kind: str) -> None:
    """An encoder or decoder backbone would silently drop n_decoder_layers: it is an error instead."""
    with pytest.raises(ValueError, match="n_decoder_layers to 0"):
        build_backbone(tiny_config(n_decoder_layers=2), kind)


def test_text_backbones_need_a_vocabulary(tiny_config: Config) -> None:
    """A vision config (vocab_size 0) cannot build a text backbone."""
    with pytest.raises(ValueError, match="vocab_size > 0"):
        build_backbone(tiny_config(vocab_size=0), "encoder")


@pytest.mark.parametrize(("n_decoder_layers", "expected"), [(0, 2), (3, 3)])
def test_encoder_decoder_layers_default_to_the_encoders(
    tiny_config: Config, n_decoder_layers: int, expected: int
) -> None:
    """n_decoder_layers 0 builds as many decoder layers as encoder layers, and the backbone's cfg says so."""
    backbone = build_backbone(tiny_config(n_decoder_layers=n_decoder_layers), "encoder_decoder")
    assert len(backbone.decoder.layers) == backbone.cfg.n_decoder_layers == expected
    assert backbone.cfg.is_encoder_decoder


def test_encoder_decoder_features_are_the_encoders_or_the_decoders(tiny_config: Config, token_ids: Ids) -> None:
    """Without decoder ids: the encoder's output; with them: the decoder attending to that output."""
    backbone = build_backbone(tiny_config(position="relative"), "encoder_decoder").eval()
    src, tgt = token_ids(2, 6), token_ids(2, 4)
    src_mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3], dtype=torch.bool)
    encoded = backbone.forward_features(src, src_mask)
    assert_close(encoded.last_hidden_state, backbone.encoder(backbone.embed(src), src_mask).last_hidden_state)
    decoded = backbone.forward_features(src, src_mask, decoder_input_ids=tgt).last_hidden_state
    memory = encoded.last_hidden_state
    expected = backbone.decoder(backbone.embed(tgt), memory=memory, memory_mask=src_mask).last_hidden_state
    assert decoded.shape == (2, 4, 32)
    assert_close(decoded, expected)


def test_language_models_are_their_backbones_plus_a_head(tiny_config: Config, token_ids: Ids) -> None:
    """CausalLM / Seq2SeqLM logits are the LM head on the backbone's features: one forward_features."""
    ids, tgt = token_ids(2, 5), token_ids(2, 3)
    gpt, t5 = CausalLM(tiny_config()).eval(), Seq2SeqLM(tiny_config(n_decoder_layers=1)).eval()
    assert isinstance(gpt, TextDecoder) and isinstance(t5, TextEncoderDecoder)
    assert_close(gpt(ids), gpt.lm_head(gpt.forward_features(ids).last_hidden_state))
    features = t5.forward_features(ids, decoder_input_ids=tgt).last_hidden_state
    assert_close(t5(ids, tgt), t5.lm_head(features))


LAYER = ["self_attn.qkv", "self_attn.out", "norm1", "ffn.up", "ffn.down", "norm2"]
CROSS = ["cross_attn.q", "cross_attn.kv", "cross_attn.out", "norm_cross"]


def _keys(prefix: str, modules: list[str]) -> set[str]:
    """weight and bias keys of each module under a prefix."""
    return {f"{prefix}{m}.{p}" for m in modules for p in ("weight", "bias")}


def test_causal_lm_state_dict_keys_are_unchanged(tiny_config: Config) -> None:
    """embed.*, decoder.*, lm_head.* exactly as before the backbone split: old checkpoints still load."""
    layers = set().union(*(_keys(f"decoder.layers.{i}.", LAYER) for i in range(2)))
    expected = {"embed.tokens.weight", "embed.positions.weight", "lm_head.proj.weight"}
    expected |= layers | _keys("decoder.", ["final_norm"])
    assert set(CausalLM(tiny_config()).state_dict()) == expected


def test_seq2seq_lm_state_dict_keys_are_unchanged(tiny_config: Config) -> None:
    """embed.*, encoder.*, decoder.*, lm_head.* exactly as before the backbone split."""
    encoder = set().union(*(_keys(f"encoder.layers.{i}.", LAYER) for i in range(2)))
    decoder = set().union(*(_keys(f"decoder.layers.{i}.", LAYER + CROSS) for i in range(2)))
    stacks = {f"{s}.position_bias.bias.weight" for s in ("encoder", "decoder")}
    stacks |= _keys("encoder.", ["final_norm"]) | _keys("decoder.", ["final_norm"])
    expected = {"embed.tokens.weight", "lm_head.proj.weight"} | encoder | decoder | stacks
    model = Seq2SeqLM(tiny_config(position="relative", n_decoder_layers=2))
    assert set(model.state_dict()) == expected
