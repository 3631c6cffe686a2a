"""Parameter and FLOP counts read from built models: published sizes, tied weights, the FLOP formula."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from tetraformer.core import (
    CausalLM,
    ImageEncoder,
    Seq2SeqLM,
    SequenceClassifier,
    TextEncoder,
    TransformerConfig,
    count_params,
    flops_per_token,
)
from tetraformer.core.accounting import token_cost

Config = Callable[..., TransformerConfig]


def _published(name: str) -> nn.Module:
    """The published model shape of a preset, heads included, built on the meta device."""
    cfg = TransformerConfig.preset(name)
    with torch.device("meta"):
        builders: dict[str, Callable[[], nn.Module]] = {
            "bert-base": lambda: SequenceClassifier(TextEncoder(cfg), 2, pooler=True),
            "gpt2": lambda: CausalLM(cfg),
            "t5-small": lambda: Seq2SeqLM(cfg),
            "vit-b/16": lambda: SequenceClassifier(ImageEncoder(cfg), 1000),
        }
        return builders[name]()


@pytest.mark.parametrize(
    ("name", "millions", "exact"),
    [
        ("bert-base", 110, 109_483_778),  # BertForSequenceClassification, 2 labels
        ("gpt2", 124, 124_439_808),  # GPT2LMHeadModel, tied
        ("t5-small", 60, 60_506_624),  # T5ForConditionalGeneration, tied
        ("vit-b/16", 86, 86_567_656),  # ViTForImageClassification / timm vit_base_patch16_224, 1000 classes
    ],
)
def test_published_sizes(name: str, millions: int, exact: int) -> None:
    """The reference shapes, built, have their published parameter counts (within 1%, and exactly HF's)."""
    n = count_params(_published(name))
    assert abs(n - millions * 1e6) / (millions * 1e6) < 0.01
    assert n == exact


def test_count_params_by_hand(tiny_config: Config) -> None:
    """A tiny BERT-like encoder: embeddings, segments, positions, then per layer attention, FFN and norms."""
    d, f, v, t, layers = 32, 64, 100, 64, 2
    cfg = tiny_config(type_vocab_size=2, embedding_norm=True)
    embeddings = v * d + 2 * d + t * d + 2 * d  # tokens, segments, positions, embedding LayerNorm
    attention = (d * 3 * d + 3 * d) + (d * d + d)  # fused qkv, output projection
    ffn = (d * f + f) + (f * d + d)
    layer = attention + ffn + 2 * (2 * d)  # two LayerNorms
    assert count_params(TextEncoder(cfg)) == embeddings + layers * layer + 2 * d  # final pre-norm


@pytest.mark.parametrize("tie", [True, False])
def test_tied_weights_count_once_and_exclude_drops_only_untied_heads(tiny_config: Config, tie: bool) -> None:
    """A tied LM head adds nothing (its matrix is the embedding's); an untied one adds V x D, and only it
    is dropped by exclude=("lm_head",)."""
    model = CausalLM(tiny_config(tie_embeddings=tie))
    backbone = count_params(model, exclude=("lm_head",))
    assert backbone == count_params(model.embed) + count_params(model.decoder)
    assert count_params(model) - backbone == (0 if tie else 100 * 32)


def test_flops_per_token_by_hand(tiny_config: Config) -> None:
    """6 x Linear weights (self/cross attention, FFN, output projection) + 12 x layers x inner x T."""
    d, inner, f, v = 32, 24, 64, 100
    model = Seq2SeqLM(tiny_config(n_decoder_layers=1, d_head=8, n_heads=3))  # 2 encoder layers, 1 decoder
    self_attn = d * 3 * inner + inner * d
    cross_attn = d * inner + d * 2 * inner + inner * d
    ffn = d * f + f * d
    matmul = 2 * (self_attn + ffn) + (self_attn + cross_attn + ffn) + v * d  # tied output projection too
    for seq_len in (1, 16):
        assert flops_per_token(model, seq_len) == 6 * matmul + 12 * 3 * inner * seq_len


def test_flops_per_token_counts_gated_ffn_and_backbone_alone(tiny_config: Config) -> None:
    """A gated FFN's up projection is 2F wide; a backbone without an LM head has no output projection."""
    d, f, v, layers = 32, 64, 100, 2
    model = CausalLM(tiny_config(activation="swiglu"))
    layer = d * 3 * d + d * d + d * 2 * f + f * d
    assert flops_per_token(model, 8) == 6 * (layers * layer + v * d) + 12 * layers * d * 8
    assert flops_per_token(TextEncoder(model.cfg), 8) == 6 * layers * layer + 12 * layers * d * 8


def test_token_cost_splits_an_encoder_decoder_by_the_tokens_each_side_sees(tiny_config: Config) -> None:
    """A source token pays the encoder's weights and scores; a target token the decoder's, its LM head and the
    cross-attention scores over the source; the two sides' weights add up to the whole model's."""
    d, inner = 32, 32
    model = Seq2SeqLM(tiny_config(n_decoder_layers=1))
    source = token_cost(model, exclude=("decoder", "lm_head"))
    target = token_cost(model, exclude=("encoder",))
    assert source.weights + target.weights == token_cost(model).weights
    assert (source.scores, source.cross) == (12 * 2 * inner, 0)  # 2 encoder layers, no cross-attention
    assert (target.scores, target.cross) == (12 * 1 * inner, 12 * 1 * inner)
    assert target.flops(10, 5, source_length=7) == 10 * (target.weights + target.scores * 5 + target.cross * 7)
    assert source.weights == 6 * 2 * (4 * d * inner + 2 * d * 64)  # Q, K, V, O and the FFN of 2 layers


def test_token_cost_counts_the_patch_projection(tiny_config: Config) -> None:
    """A ViT's patchifying Conv2d is one matmul per patch: its weights count like a Linear's."""
    model = ImageEncoder(tiny_config(image_size=32, patch_size=8, vocab_size=0))
    conv = model.embed.proj.weight.numel()
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    assert token_cost(model).weights == 6 * (linear + conv)
