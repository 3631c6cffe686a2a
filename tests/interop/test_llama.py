"""Llama-family import/export against transformers: Llama, Qwen2, Qwen3 and Mistral logits, padding, decoding,
RoPE scaling, tied and untied heads, sharded checkpoints and round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from torch import Tensor

from tests.interop.text_checkpoints import TOL, export_and_reload, max_diff, random_hf_model, save, state_dicts_equal
from tetraformer.core import CausalLM, GenerationConfig, TransformerConfig, generate
from tetraformer.interop import InteropError, export_class, load_hf
from tetraformer.interop.convert import export_network

BASE: dict[str, Any] = dict(
    vocab_size=100,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=0,  # no EOS: never stop early
)
LLAMA3 = dict(
    rope_type="llama3",
    rope_theta=500000.0,
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=16,  # small, so the bands fall inside a tiny head's frequencies
)
VARIANTS: dict[str, tuple[str, str, dict[str, Any]]] = {  # name -> (architecture, config class, fields)
    "llama": ("LlamaForCausalLM", "LlamaConfig", {}),
    "llama-tied-mqa": ("LlamaForCausalLM", "LlamaConfig", dict(tie_word_embeddings=True, num_key_value_heads=1)),
    "llama3-rope": ("LlamaForCausalLM", "LlamaConfig", dict(rope_parameters=LLAMA3, tie_word_embeddings=True)),
    "llama-linear-rope": (
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=4.0)),
    ),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(tie_word_embeddings=True)),
    "qwen2-yarn": (
        "Qwen2ForCausalLM",
        "Qwen2Config",
        dict(
            rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=8)
        ),
    ),
    "qwen2-untied": ("Qwen2ForCausalLM", "Qwen2Config", {}),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(head_dim=16, tie_word_embeddings=True)),
    "qwen3-untied": ("Qwen3ForCausalLM", "Qwen3Config", dict(head_dim=16)),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(sliding_window=4)),
    "mistral-no-window": ("MistralForCausalLM", "MistralConfig", dict(sliding_window=None)),
}
PADDING = ("none", "right", "left")


def make_hf(variant: str, **overrides: Any) -> transformers.PreTrainedModel:
    """A random tiny transformers model of a variant."""
    architecture, config_class, fields = VARIANTS[variant]
    config = getattr(transformers, config_class)(**{**BASE, **fields, **overrides})
    return random_hf_model(architecture, config)


def batch(padding: str = "right", length: int = 10) -> dict[str, Tensor]:
    """Three rows; with padding, two of them have 3 and 6 pad tokens on the given side."""
    input_ids = torch.randint(1, BASE["vocab_size"], (3, length))
    mask = torch.ones_like(input_ids)
    for row, pads in ((1, 3), (2, 6)):
        if padding == "right":
            mask[row, length - pads :] = 0
        elif padding == "left":
            mask[row, :pads] = 0
    return dict(input_ids=input_ids.masked_fill(mask == 0, 0), attention_mask=mask)


@torch.no_grad()
def diff(hf_model: transformers.PreTrainedModel, ours: torch.nn.Module, inputs: dict[str, Tensor]) -> float:
    """Largest |difference| from transformers' logits at real tokens."""
    return max_diff(hf_model(**inputs), ours(**inputs), inputs["attention_mask"])


@pytest.mark.parametrize("padding", PADDING)
@pytest.mark.parametrize("variant", VARIANTS)
def test_logits_match_transformers(variant: str, padding: str, tmp_path: Path) -> None:
    """fp32 logits equal transformers' within 1e-4 with no, right or left padding."""
    hf_model = make_hf(variant)
    ours = load_hf(save(hf_model, tmp_path))
    assert type(ours).architecture == VARIANTS[variant][0]
    assert ours.core.cfg.tie_embeddings == hf_model.config.tie_word_embeddings
    assert diff(hf_model, ours, batch(padding, length=12)) < TOL


def test_fields_reach_the_core(tmp_path: Path) -> None:
    """Each variant's distinguishing settings land in the core config."""
    cfgs = {v: load_hf(save(make_hf(v), tmp_path / v)).core.cfg for v in ("llama3-rope", "qwen2", "qwen3", "mistral")}
    assert cfgs["llama3-rope"].rope_scaling == {k: v for k, v in LLAMA3.items() if k != "rope_theta"}
    assert cfgs["llama3-rope"].rope_base == 500000.0
    assert cfgs["qwen2"].use_qkv_bias and not cfgs["qwen2"].bias
    assert cfgs["qwen3"].qk_norm and cfgs["qwen3"].head_dim == 16 and cfgs["qwen3"].inner_dim == 64
    assert cfgs["mistral"].sliding_window == 4 and cfgs["mistral"].kv_heads == 2


@pytest.mark.parametrize("padding", ["none", "left"])
@pytest.mark.parametrize("variant", ["llama-tied-mqa", "llama3-rope", "qwen2", "qwen2-yarn", "qwen3", "mistral"])
def test_greedy_decoding_matches_transformers_generate(variant: str, padding: str, tmp_path: Path) -> None:
    """20 greedy tokens on our KV cache equal transformers' generate, unpadded and left-padded."""
    hf_model = make_hf(variant)
    ours = load_hf(save(hf_model, tmp_path))
    inputs = batch(padding, length=7)
    theirs = hf_model.generate(**inputs, do_sample=False, max_new_tokens=20)
    config = GenerationConfig(max_new_tokens=20, do_sample=False, eos_token_id=None)
    mine = generate(ours.core, inputs["input_ids"], inputs["attention_mask"] if padding != "none" else None, config)
    assert theirs.shape == (3, 27)
    assert torch.equal(mine, theirs)


@pytest.mark.parametrize("variant", ["llama", "qwen3", "mistral"])
def test_beam_search_matches_transformers_generate(variant: str, tmp_path: Path) -> None:
    """Beam search (3 beams, no EOS) on our cache returns transformers' best beam."""
    hf_model = make_hf(variant)
    ours = load_hf(save(hf_model, tmp_path))
    inputs = batch("none", length=6)
    theirs = hf_model.generate(**inputs, do_sample=False, num_beams=3, max_new_tokens=10)
    mine = generate(ours.core, inputs["input_ids"], None, GenerationConfig(max_new_tokens=10, num_beams=3))
    assert torch.equal(mine, theirs)


@pytest.mark.parametrize(
    "variant", ["llama", "llama-tied-mqa", "llama3-rope", "qwen2", "qwen2-yarn", "qwen3-untied", "mistral"]
)
def test_export_round_trips_and_transformers_loads_it(variant: str, tmp_path: Path) -> None:
    """save_hf then transformers loads cleanly (no missing or unexpected keys) and gives the same logits."""
    hf_model = make_hf(variant)
    reloaded = export_and_reload(hf_model, VARIANTS[variant][0], tmp_path)
    assert diff(hf_model, reloaded, batch("left")) < TOL
    assert reloaded.config.tie_word_embeddings == hf_model.config.tie_word_embeddings


def test_sharded_checkpoint_loads(tmp_path: Path) -> None:
    """save_pretrained(max_shard_size=...) writes shards and model.safetensors.index.json; it loads the same."""
    hf_model = make_hf("llama")
    hf_model.save_pretrained(tmp_path, max_shard_size="20KB")
    shards = sorted(p.name for p in tmp_path.glob("model-*.safetensors"))
    assert (tmp_path / "model.safetensors.index.json").is_file() and len(shards) > 1
    assert diff(hf_model, load_hf(tmp_path), batch("left")) < TOL


@pytest.mark.parametrize(
    ("fields", "architecture"),
    [
        ({}, "LlamaForCausalLM"),
        (dict(qkv_bias=True), "Qwen2ForCausalLM"),
        (dict(qk_norm=True, d_head=16), "Qwen3ForCausalLM"),
        (dict(sliding_window=8), "MistralForCausalLM"),
    ],
)
def test_platform_decoder_exports_as_its_family_member(fields: dict, architecture: str, tmp_path: Path) -> None:
    """A rotary RMSNorm SwiGLU CausalLM built here exports as the member its fields make it; transformers agrees."""
    cfg = TransformerConfig.preset(
        "tiny", position="rotary", norm="rmsnorm", activation="swiglu", bias=False, n_heads=4, n_kv_heads=2, **fields
    )
    net = CausalLM(cfg).eval()
    assert export_class(net).architecture == architecture
    out = export_network(net, None, tmp_path)
    reloaded = getattr(transformers, architecture).from_pretrained(out).eval()
    assert json.loads((out / "config.json").read_text())["architectures"] == [architecture]
    inputs = batch("left")
    with torch.no_grad():
        assert (reloaded(**inputs).logits - net(**inputs)).abs()[inputs["attention_mask"].bool()].max() < TOL
    assert state_dicts_equal(load_hf(out).core, net)


def test_learned_positions_still_export_as_gpt2() -> None:
    """A CausalLM with a learned table is GPT-2's, not the Llama family's."""
    assert export_class(CausalLM(TransformerConfig.preset("tiny"))).architecture == "GPT2LMHeadModel"


def test_unexportable_rotary_decoder_names_the_field(tmp_path: Path) -> None:
    """A rotary decoder with LayerNorm cannot be a Llama: the error names the field and both values."""
    net = CausalLM(TransformerConfig.preset("tiny", position="rotary", activation="swiglu", bias=False))
    with pytest.raises(InteropError, match=r"cannot export as Llama.*'norm': 'layernorm'.*'norm': 'rmsnorm'"):
        export_network(net, None, tmp_path)


@pytest.mark.parametrize(
    ("variant", "field", "value"),
    [
        ("llama", "attention_bias", True),
        ("llama", "hidden_act", "gelu"),
        ("qwen2", "use_sliding_window", True),
        ("llama", "rope_parameters", dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)),
    ],
)
def test_unsupported_config_is_named(variant: str, field: str, value: Any, tmp_path: Path) -> None:
    """Settings the core cannot reproduce are errors naming the config entry."""
    path = save(make_hf(variant), tmp_path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(InteropError, match=rf"{field}=|rope_type='dynamic'"):
        load_hf(path)


def test_transformers4_rope_entries_load(tmp_path: Path) -> None:
    """A config.json with transformers 4's rope_theta and rope_scaling (Llama 3.x on the hub) loads the same."""
    hf_model = make_hf("llama3-rope")
    path = save(hf_model, tmp_path)
    config = json.loads((path / "config.json").read_text())
    rope = config.pop("rope_parameters")
    config |= {"rope_theta": rope.pop("rope_theta"), "rope_scaling": rope}
    (path / "config.json").write_text(json.dumps(config))
    ours = load_hf(path)
    assert ours.core.cfg.rope_base == 500000.0 and ours.core.cfg.rope_scaling["rope_type"] == "llama3"
    assert diff(hf_model, ours, batch("left")) < TOL
