"""TransformerConfig: presets build, parameter accounting matches the built models and published sizes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from tetraformer.core import (
    PRESETS,
    CausalLM,
    ImageEncoder,
    Seq2SeqLM,
    SequenceClassifier,
    TextEncoder,
    TransformerConfig,
)

Config = Callable[..., TransformerConfig]
TINY_VARIANTS: list[dict[str, Any]] = [
    dict(norm="rmsnorm"),
    dict(bias=False),
    dict(activation="swiglu", norm_position="post"),
    dict(d_head=8, n_heads=3),
    dict(position="relative", n_decoder_layers=3),
    dict(position="sinusoidal", embedding_norm=True, type_vocab_size=2),
    dict(position="alibi", tie_embeddings=False),
    dict(vocab_size=0, image_size=32, patch_size=8, n_channels=1),
    dict(vocab_size=0, image_size=32, patch_size=8, position="rotary", norm="rmsnorm"),
]


def _families(cfg: TransformerConfig) -> list[type[nn.Module]]:
    """The families a config describes: ViT when it has no vocabulary, T5 with decoder layers, else both text ones."""
    if cfg.vocab_size == 0:
        return [ImageEncoder]
    return [Seq2SeqLM] if cfg.is_encoder_decoder else [TextEncoder, CausalLM]


def _backbone_params(model: nn.Module) -> int:
    """Unique parameters of everything but the LM head (a tied head adds nothing anyway)."""
    params = {
        id(p): p for name, child in model.named_children() if name != "lm_head" for p in child.parameters()
    }
    return sum(p.numel() for p in params.values())


def _meta_build(family: type[nn.Module], cfg: TransformerConfig) -> nn.Module:
    """Build on the meta device: shapes without memory or init cost."""
    with torch.device("meta"):
        return family(cfg)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_and_num_params_matches(name: str) -> None:
    """Each preset builds its families, and config.num_params equals the built backbone exactly."""
    cfg = TransformerConfig.preset(name)
    for family in _families(cfg):
        model = _meta_build(family, cfg)
        assert _backbone_params(model) == cfg.num_params(vision=family is ImageEncoder), family.__name__


@pytest.mark.parametrize("overrides", TINY_VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_num_params_matches_built_tiny_variants(tiny_config: Config, overrides: dict[str, Any]) -> None:
    """num_params tracks norms, bias, gating, d_head, relative tables, decoders, untied heads and patches."""
    cfg = tiny_config(**overrides)
    for family in _families(cfg):
        assert _backbone_params(family(cfg)) == cfg.num_params(vision=family is ImageEncoder), family.__name__


def _published(name: str) -> nn.Module:
    """The published model shape of a preset, heads included."""
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
    """The reference shapes have their published parameter counts (within 1%, and exactly HF's)."""
    n = sum(p.numel() for p in _published(name).parameters())
    assert abs(n - millions * 1e6) / (millions * 1e6) < 0.01
    assert n == exact


def test_flops_per_token_counts_matmuls_and_attention(tiny_config: Config) -> None:
    """6 x (layer + output projection params) + 12 x layers x inner width x sequence length."""
    cfg = tiny_config(n_decoder_layers=1, d_head=8, n_heads=3)
    model = Seq2SeqLM(cfg)
    layers = [*model.encoder.layers, *model.decoder.layers]
    matmul = (
        sum(p.numel() for layer in layers for p in layer.parameters()) + model.lm_head.proj.weight.numel()
    )
    for seq_len in (1, 16):
        assert cfg.flops_per_token(seq_len) == 6 * matmul + 12 * 3 * 24 * seq_len
    assert cfg.flops_per_token() == cfg.flops_per_token(cfg.max_len)


@pytest.mark.parametrize("field", ["norm", "norm_position", "activation", "position", "attention"])
def test_unknown_names_are_rejected_with_the_choices(field: str) -> None:
    """A misspelt choice raises a ValueError that names the field and the allowed values."""
    with pytest.raises(ValueError, match=f"{field}='bogus'; expected one of"):
        TransformerConfig(**{field: "bogus"})


def test_indivisible_heads_rejected_unless_d_head_given() -> None:
    """d_model must split into heads, unless an explicit d_head decouples them."""
    with pytest.raises(ValueError, match="not divisible by n_heads=3"):
        TransformerConfig(d_model=32, n_heads=3)
    cfg = TransformerConfig(d_model=32, n_heads=3, d_head=8)
    assert (cfg.head_dim, cfg.inner_dim) == (8, 24)


def test_unknown_preset_lists_known_ones() -> None:
    """preset() names the presets it knows."""
    with pytest.raises(KeyError, match="gpt2"):
        TransformerConfig.preset("gpt-5")


def test_dict_round_trip_and_unknown_fields() -> None:
    """to_dict/from_dict round-trip; an unknown key is named in the error."""
    cfg = TransformerConfig.preset("t5-small", dropout=0.0)
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.replace(n_layers=1).n_layers == 1 and cfg.n_layers == 6
    with pytest.raises(ValueError, match="n_layer"):
        TransformerConfig.from_dict({**cfg.to_dict(), "n_layer": 3})
