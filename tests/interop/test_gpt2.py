"""GPT-2 import/export against transformers: outputs, padding, round trips, OpenAI layout, errors, greedy decoding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from torch import Tensor

from tests.interop.text_checkpoints import (
    TOL,
    bin_checkpoint,
    export_and_reload,
    max_diff,
    random_hf_model,
    rewrite_weights,
    save,
)
from tetraformer.core import CausalLM, GenerationConfig, TransformerConfig, generate
from tetraformer.interop import InteropError, load_hf, save_hf
from tetraformer.interop.gpt2 import HFGPT2LMHeadModel

BASE: dict[str, Any] = dict(
    vocab_size=100,
    n_embd=32,
    n_layer=2,
    n_head=2,
    n_positions=64,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=0,  # no EOS in a 100-token vocabulary: never stop early
)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "base": ("GPT2Model", {}),
    "base-gelu-eps1e-2-inner48": ("GPT2Model", dict(activation_function="gelu", layer_norm_epsilon=1e-2, n_inner=48)),
    "lm": ("GPT2LMHeadModel", {}),
    "lm-untied-relu": ("GPT2LMHeadModel", dict(tie_word_embeddings=False, activation_function="relu")),
    "lm-unscaled-4heads-fast": (
        "GPT2LMHeadModel",
        dict(scale_attn_weights=False, n_head=4, activation_function="gelu_fast"),
    ),
}
PADDING = ("none", "right", "left")


def make_hf(variant: str, **overrides: Any) -> transformers.PreTrainedModel:
    """A random tiny transformers GPT-2 of a variant."""
    architecture, fields = VARIANTS[variant]
    return random_hf_model(architecture, transformers.GPT2Config(**{**BASE, **fields, **overrides}))


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
    """Largest |difference| from transformers' outputs at real tokens (a pad's own output is not defined)."""
    return max_diff(hf_model(**inputs), ours(**inputs), inputs["attention_mask"])


@pytest.mark.parametrize("padding", PADDING)
@pytest.mark.parametrize("variant", VARIANTS)
def test_outputs_match_transformers(variant: str, padding: str, tmp_path: Path) -> None:
    """Logits (or final hidden states) equal transformers' with no, right or left padding."""
    hf_model = make_hf(variant)
    ours = load_hf(save(hf_model, tmp_path))
    assert type(ours).architecture == VARIANTS[variant][0]
    assert diff(hf_model, ours, batch(padding)) < TOL


@pytest.mark.parametrize("variant", ["base", "lm", "lm-untied-relu", "lm-unscaled-4heads-fast"])
def test_export_round_trips_and_transformers_loads_it(variant: str, tmp_path: Path) -> None:
    """Export then import gives identical tensors; transformers loads the export cleanly, same outputs."""
    hf_model = make_hf(variant)
    reloaded = export_and_reload(hf_model, VARIANTS[variant][0], tmp_path)
    assert diff(hf_model, reloaded, batch()) < TOL
    assert reloaded.config.tie_word_embeddings == hf_model.config.tie_word_embeddings


def test_bin_checkpoint_loads(tmp_path: Path) -> None:
    """A pytorch_model.bin (transformers 4's safe_serialization=False) loads like safetensors."""
    hf_model = make_hf("lm")
    assert diff(hf_model, load_hf(bin_checkpoint(hf_model, tmp_path)), batch()) < TOL


def test_openai_layout_loads(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The hub's gpt2 layout: no `transformer.` prefix, causal-mask buffers, a tied lm_head copy; nothing to report."""
    hf_model = make_hf("lm")

    def openai(weights: dict[str, Tensor]) -> dict[str, Tensor]:
        bare = {k.removeprefix("transformer."): v for k, v in weights.items()}
        buffers = {f"h.{i}.attn.{name}": torch.ones(1) for i in range(2) for name in ("bias", "masked_bias")}
        return {**bare, **buffers, "lm_head.weight": bare["wte.weight"].clone()}

    path = rewrite_weights(save(hf_model, tmp_path), openai)
    with caplog.at_level("WARNING", logger="tetraformer.interop"):
        ours = load_hf(path)
    assert ours.core.cfg.tie_embeddings and not caplog.text
    assert diff(hf_model, ours, batch()) < TOL


def test_tied_config_with_a_different_head_unties_as_transformers_does(tmp_path: Path) -> None:
    """tie_word_embeddings=True, yet lm_head.weight differs from wte: transformers keeps both, and so do we."""
    hf_model = make_hf("lm-untied-relu")
    path = save(hf_model, tmp_path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    theirs, ours = transformers.GPT2LMHeadModel.from_pretrained(path).eval(), load_hf(path)
    assert not ours.core.cfg.tie_embeddings
    assert diff(theirs, ours, batch()) < TOL and diff(hf_model, ours, batch()) < TOL


@pytest.mark.parametrize("padding", ["none", "left"])
def test_greedy_decoding_matches_transformers_generate(padding: str, tmp_path: Path) -> None:
    """20 greedy tokens on our KV cache equal transformers' generate, unpadded and left-padded."""
    hf_model = make_hf("lm")
    ours = load_hf(save(hf_model, tmp_path))
    inputs = batch(padding, length=7)
    theirs = hf_model.generate(**inputs, do_sample=False, max_new_tokens=20)
    config = GenerationConfig(max_new_tokens=20, do_sample=False, eos_token_id=None)
    mask = inputs["attention_mask"] if padding != "none" else None
    mine = generate(ours.core, inputs["input_ids"], mask, config)
    assert theirs.shape == (3, 27)
    assert torch.equal(mine, theirs)


def test_platform_decoder_exports_as_gpt2(tmp_path: Path) -> None:
    """A CausalLM built here (the gpt2 preset's architecture) exports to a directory transformers reads alike."""
    cfg = TransformerConfig.preset("gpt2", d_model=32, n_heads=2, n_layers=2, d_ff=48, vocab_size=100, max_len=32)
    ours = HFGPT2LMHeadModel(CausalLM(cfg), {}).eval()
    reloaded = transformers.GPT2LMHeadModel.from_pretrained(save_hf(ours, tmp_path)).eval()
    assert reloaded.config.eos_token_id is None
    assert diff(reloaded, ours, batch()) < TOL


def test_rotary_decoder_cannot_export_as_gpt2(tmp_path: Path) -> None:
    """Exporting a model GPT-2 cannot express names the field and both values."""
    cfg = TransformerConfig.preset("tiny", position="rotary")
    with pytest.raises(InteropError, match=r"cannot export as GPT-2.*'position': 'rotary'.*'position': 'learned'"):
        save_hf(HFGPT2LMHeadModel(CausalLM(cfg), {}), tmp_path)


def test_mismatched_tensor_names_key_and_both_shapes(tmp_path: Path) -> None:
    """A Conv1D weight stored as (out, in) by mistake is an error naming the key and both shapes."""
    key = "transformer.h.0.mlp.c_fc.weight"
    path = rewrite_weights(save(make_hf("lm"), tmp_path), lambda w: {**w, key: w[key].t()})
    with pytest.raises(InteropError, match=rf"'{key}' has shape \(128, 32\), expected \(32, 128\)"):
        load_hf(path)


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    """An untied model without its lm_head.weight is an error naming it."""
    path = save(make_hf("lm-untied-relu"), tmp_path)
    rewrite_weights(path, lambda w: {k: v for k, v in w.items() if k != "lm_head.weight"})
    with pytest.raises(InteropError, match=r"missing tensor 'lm_head.weight'"):
        load_hf(path)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("scale_attn_by_inverse_layer_idx", True),
        ("add_cross_attention", True),
        ("activation_function", "silu"),
    ],
)
def test_unsupported_config_is_named(field: str, value: Any, tmp_path: Path) -> None:
    """Settings the core cannot reproduce are errors naming the config entry and its value."""
    path = save(make_hf("lm"), tmp_path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(InteropError, match=rf"{field}={value!r}"):
        load_hf(path)
