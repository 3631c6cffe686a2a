"""T5 import/export against transformers: logits, padding, old and new config styles, round trips, generation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from tests.interop.text_checkpoints import safetensors_to_bin
from tetraformer.core import GenerationConfig, Seq2SeqLM, TransformerConfig, generate
from tetraformer.interop import InteropError, load_hf, save_hf
from tetraformer.interop.t5 import HFT5ForConditionalGeneration

TOL = 1e-4
BASE: dict[str, Any] = dict(
    vocab_size=100,
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=2,
    num_heads=4,
    dropout_rate=0.0,
    decoder_start_token_id=0,
    eos_token_id=None,  # no EOS: greedy decoding never stops early
)
VARIANTS: dict[str, dict[str, Any]] = {
    "v1.0-relu-tied": dict(feed_forward_proj="relu"),
    "v1.1-gated-gelu-untied": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False),
    "buckets8-dist16-eps1e-3-dec3-dkv12": dict(
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        layer_norm_epsilon=1e-3,
        num_decoder_layers=3,
        d_kv=12,
    ),
    "gated-silu-2heads": dict(feed_forward_proj="gated-silu", num_heads=2, relative_attention_num_buckets=16),
}


@torch.no_grad()
def jitter(model: nn.Module) -> nn.Module:
    """Add noise to norms and biases: HF inits them to 1 and 0, which would hide mapping mix-ups."""
    for param in model.parameters():
        if param.ndim == 1:
            param.add_(0.2 * torch.randn_like(param))
    return model


def make_hf(path: Path, variant: str, cls: type = transformers.T5ForConditionalGeneration) -> nn.Module:
    """A random tiny HF T5 saved to `path`; untied variants get an lm_head of their own."""
    overrides = VARIANTS[variant]
    model = cls(transformers.T5Config(**{**BASE, **overrides}))
    if overrides.get("tie_word_embeddings") is False and hasattr(model, "lm_head"):  # transformers 5 ties
        model.lm_head.weight = nn.Parameter(torch.randn_like(model.lm_head.weight))
    jitter(model).save_pretrained(path)
    return model.eval()


def batch() -> dict[str, Tensor]:
    """Three sources of 20 tokens (one right-padded, one left-padded) and unpadded decoder inputs."""
    input_ids = torch.randint(2, 100, (3, 20))
    mask = torch.ones_like(input_ids)
    mask[1, 13:], mask[2, :6] = 0, 0
    return dict(input_ids=input_ids, attention_mask=mask, decoder_input_ids=torch.randint(2, 100, (3, 9)))


def max_diff(a: Tensor, b: Tensor) -> float:
    """Largest absolute difference; checks the reference is far from zero so a tolerance means something."""
    assert a.shape == b.shape and b.abs().max() > 100 * TOL
    return (a - b).abs().max().item()


def edit_config(path: Path, **changes: Any) -> None:
    """Rewrite config.json entries; None deletes an entry."""
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    config = {k: v for k, v in config.items() if v is not None}
    (path / "config.json").write_text(json.dumps(config))


def edit_weights(path: Path, **changes: Tensor | None) -> None:
    """Replace tensors of model.safetensors; None deletes one (keys use '__' for '.')."""
    weights = load_file(path / "model.safetensors")
    for key, value in changes.items():
        weights.pop(key.replace("__", "."))
        if value is not None:
            weights[key.replace("__", ".")] = value
    save_file(weights, path / "model.safetensors", metadata={"format": "pt"})


@torch.no_grad()
@pytest.mark.parametrize("variant", VARIANTS)
def test_logits_match_transformers(tmp_path: Path, variant: str) -> None:
    hf = make_hf(tmp_path, variant)
    ours, inputs = load_hf(tmp_path), batch()
    assert max_diff(ours(**inputs).logits, hf(**inputs).logits) < TOL
    tied = ours.core.lm_head.proj.weight is ours.core.embed.tokens.weight
    assert tied == ("untied" not in variant)
    assert ours.core.cfg.rescale_tied_logits == hf.config.scale_decoder_outputs


@torch.no_grad()
@pytest.mark.parametrize("variant", ["v1.0-relu-tied", "buckets8-dist16-eps1e-3-dec3-dkv12"])
def test_base_model_returns_the_decoder_states(tmp_path: Path, variant: str) -> None:
    hf = make_hf(tmp_path, variant, transformers.T5Model)
    ours, inputs = load_hf(tmp_path), batch()
    out = ours(**inputs)
    assert out.logits is None
    assert max_diff(out.last_hidden_state, hf(**inputs).last_hidden_state) < TOL


@torch.no_grad()
def test_padded_decoder_rows_match_on_real_tokens(tmp_path: Path) -> None:
    hf = make_hf(tmp_path, "v1.1-gated-gelu-untied")
    ours, inputs = load_hf(tmp_path), batch()
    inputs["decoder_attention_mask"] = torch.ones_like(inputs["decoder_input_ids"])
    inputs["decoder_attention_mask"][0, 5:] = 0
    real = inputs["decoder_attention_mask"].bool()
    assert max_diff(ours(**inputs).logits[real], hf(**inputs).logits[real]) < TOL


@torch.no_grad()
@pytest.mark.parametrize("variant", ["v1.0-relu-tied", "v1.1-gated-gelu-untied"])
def test_configs_written_before_transformers_5_load(tmp_path: Path, variant: str) -> None:
    """Older config.json files have no scale_decoder_outputs: tie_word_embeddings says whether to rescale."""
    hf = make_hf(tmp_path, variant)
    untied = "untied" in variant
    edit_config(tmp_path, scale_decoder_outputs=None, tie_word_embeddings=False if untied else None)
    ours, inputs = load_hf(tmp_path), batch()
    assert ours.core.cfg.rescale_tied_logits == (not untied)
    assert max_diff(ours(**inputs).logits, hf(**inputs).logits) < TOL


@torch.no_grad()
def test_an_untied_rescaled_head_folds_the_scale_into_its_weights(tmp_path: Path) -> None:
    make_hf(tmp_path, "v1.1-gated-gelu-untied")
    edit_config(tmp_path, scale_decoder_outputs=True)
    hf = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path).eval()
    ours, inputs = load_hf(tmp_path), batch()
    assert hf.config.scale_decoder_outputs and hf.lm_head.weight is not hf.shared.weight
    assert max_diff(ours(**inputs).logits, hf(**inputs).logits) < TOL


@torch.no_grad()
def test_swapping_gate_and_value_would_be_caught(tmp_path: Path) -> None:
    """The parity tests can fail: wi_1 as the gate instead of wi_0 changes the logits well beyond TOL."""
    hf = make_hf(tmp_path, "v1.1-gated-gelu-untied")
    ours, inputs = load_hf(tmp_path), batch()
    for layer in (*ours.core.encoder.layers, *ours.core.decoder.layers):
        gate, value = layer.ffn.up.weight.chunk(2)
        layer.ffn.up.weight.copy_(torch.cat((value, gate)))
    assert max_diff(ours(**inputs).logits, hf(**inputs).logits) > 1e-2


@torch.no_grad()
@pytest.mark.parametrize("variant", VARIANTS)
def test_export_round_trips_and_transformers_loads_it(tmp_path: Path, variant: str) -> None:
    hf = make_hf(tmp_path / "in", variant)
    ours = load_hf(tmp_path / "in")
    save_hf(ours, tmp_path / "out")
    again = load_hf(tmp_path / "out")
    mine, theirs = ours.state_dict(), again.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    exported = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "out").eval()
    assert type(exported) is transformers.T5ForConditionalGeneration
    assert exported.config.feed_forward_proj == hf.config.feed_forward_proj
    assert exported.config.scale_decoder_outputs == hf.config.scale_decoder_outputs
    assert ("lm_head.weight" in load_file(tmp_path / "out" / "model.safetensors")) == ("untied" in variant)
    inputs = batch()
    assert max_diff(exported(**inputs).logits, hf(**inputs).logits) < TOL


@torch.no_grad()
def test_base_model_exports_as_t5model(tmp_path: Path) -> None:
    hf = make_hf(tmp_path / "in", "gated-silu-2heads", transformers.T5Model)
    save_hf(load_hf(tmp_path / "in"), tmp_path / "out")
    exported = transformers.AutoModel.from_pretrained(tmp_path / "out").eval()
    assert type(exported) is transformers.T5Model
    inputs = batch()
    assert max_diff(exported(**inputs).last_hidden_state, hf(**inputs).last_hidden_state) < TOL


@torch.no_grad()
@pytest.mark.parametrize("scale_attention", [False, True])
def test_a_core_trained_from_scratch_exports_to_transformers(tmp_path: Path, scale_attention: bool) -> None:
    """T5's own unscaled attention, or 1/sqrt(d_head) scores folded into the exported query weights."""
    cfg = TransformerConfig.preset(
        "t5-small",
        d_model=32,
        n_heads=4,
        d_head=8,
        n_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        vocab_size=100,
        dropout=0.0,
        relative_buckets=8,
        relative_max_distance=20,
        scale_attention=scale_attention,
    )
    ours = HFT5ForConditionalGeneration(Seq2SeqLM(cfg).eval(), {})
    save_hf(ours, tmp_path)
    exported = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path).eval()
    inputs = batch()
    assert max_diff(exported(**inputs).logits, ours(**inputs).logits) < TOL


def test_export_refuses_a_core_t5_cannot_express() -> None:
    cfg = TransformerConfig.preset("tiny", n_decoder_layers=2)  # LayerNorm, biases, learned positions
    with pytest.raises(InteropError, match=r"cannot export as T5: .*'norm': 'layernorm'"):
        save_hf(HFT5ForConditionalGeneration(Seq2SeqLM(cfg), {}), "unused")


@torch.no_grad()
def test_pytorch_model_bin_loads(tmp_path: Path) -> None:
    hf = make_hf(tmp_path, "v1.1-gated-gelu-untied")
    safetensors_to_bin(tmp_path)
    ours, inputs = load_hf(tmp_path), batch()
    assert max_diff(ours(**inputs).logits, hf(**inputs).logits) < TOL


@pytest.mark.parametrize("variant", ["v1.0-relu-tied", "v1.1-gated-gelu-untied"])
def test_greedy_generation_matches_transformers(tmp_path: Path, variant: str) -> None:
    hf = make_hf(tmp_path, variant)
    ours, inputs = load_hf(tmp_path), batch()
    config = GenerationConfig(max_new_tokens=20, do_sample=False, eos_token_id=None, decoder_start_token_id=0)
    mine = generate(ours.core, inputs["input_ids"], inputs["attention_mask"], config)
    theirs = hf.generate(
        input_ids=inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        do_sample=False,
        max_new_tokens=20,
    )
    assert theirs.shape == (3, 21) and (theirs[:, 0] == 0).all()  # the start token, then 20 new ones
    assert torch.equal(mine, theirs[:, 1:])


def test_unsupported_architecture_is_named(tmp_path: Path) -> None:
    make_hf(tmp_path, "v1.0-relu-tied")
    edit_config(tmp_path, architectures=["T5ForQuestionAnswering"])
    with pytest.raises(InteropError, match=r"unsupported architecture 'T5ForQuestionAnswering'.*'T5Model'"):
        load_hf(tmp_path)


def test_missing_weights_file_is_named(tmp_path: Path) -> None:
    make_hf(tmp_path, "v1.0-relu-tied")
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(InteropError, match=r"no model.safetensors or pytorch_model.bin .*config.json"):
        load_hf(tmp_path)


def test_mismatched_tensor_names_key_and_both_shapes(tmp_path: Path) -> None:
    make_hf(tmp_path, "v1.0-relu-tied")
    edit_weights(tmp_path, encoder__block__1__layer__0__SelfAttention__k__weight=torch.zeros(32, 33))
    with pytest.raises(
        InteropError,
        match=r"'encoder.block.1.layer.0.SelfAttention.k.weight' has shape \(32, 33\), expected \(32, 32\)",
    ):
        load_hf(tmp_path)


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    make_hf(tmp_path, "buckets8-dist16-eps1e-3-dec3-dkv12")
    edit_weights(tmp_path, decoder__block__0__layer__0__SelfAttention__relative_attention_bias__weight=None)
    with pytest.raises(
        InteropError, match=r"missing tensor 'decoder.block.0.layer.0.SelfAttention.relative_attention_bias"
    ):
        load_hf(tmp_path)


def test_unsupported_feed_forward_is_named(tmp_path: Path) -> None:
    make_hf(tmp_path, "v1.0-relu-tied")
    edit_config(tmp_path, feed_forward_proj="gated-relu")
    with pytest.raises(
        InteropError, match=r"feed_forward_proj='gated-relu' is not supported; supported: .*'gated-gelu'"
    ):
        load_hf(tmp_path)


def test_decoder_inputs_are_required(tmp_path: Path) -> None:
    make_hf(tmp_path, "v1.0-relu-tied")
    with pytest.raises(ValueError, match="decoder_input_ids"):
        load_hf(tmp_path)(input_ids=torch.ones(1, 4, dtype=torch.long))


@pytest.mark.parametrize("variant", ["v1.0-relu-tied", "v1.1-gated-gelu-untied"])
def test_t5_init_scheme_draws_transformers_stds(variant: str) -> None:
    """A fresh core T5 (init_scheme t5) has each tensor's spread of a fresh transformers T5 of the same shape."""
    shape = dict(vocab_size=512, d_model=64, d_kv=16, d_ff=256, num_layers=2, num_heads=4, dropout_rate=0.0)
    hf_cfg = transformers.T5Config(**{**shape, **VARIANTS[variant]})
    torch.manual_seed(0)
    theirs = transformers.T5ForConditionalGeneration(hf_cfg).state_dict()
    core = Seq2SeqLM(
        TransformerConfig.preset(
            "t5-small",
            d_model=64,
            n_heads=4,
            d_head=16,
            n_layers=2,
            n_decoder_layers=2,
            d_ff=256,
            vocab_size=512,
            activation="geglu_tanh" if "gated" in variant else "relu",
            tie_embeddings="tied" in variant,
        )
    )
    ours = HFT5ForConditionalGeneration(core, {}).export_weights()
    for name, tensor in ours.items():
        if tensor.ndim < 2 or name not in theirs:
            continue
        tolerance = 0.3 if tensor.numel() < 1000 else 0.1  # the relative bias table has 32 x 4 entries
        assert tensor.float().std().item() == pytest.approx(theirs[name].float().std().item(), rel=tolerance), name
