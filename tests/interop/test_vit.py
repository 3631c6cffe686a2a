"""ViT import/export against transformers: logits, hidden states, pooler, interpolation, round trips, errors."""

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
from tetraformer.core import ImageEncoder, TransformerConfig
from tetraformer.interop import InteropError, load_hf, save_hf
from tetraformer.interop.vit import HFViTModel

TOL = 1e-4
BASE: dict[str, Any] = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    image_size=32,
    patch_size=8,
    num_channels=3,
    initializer_range=0.2,  # the default 0.02 leaves attention near uniform, blind to a Q/K mix-up
)
VARIANTS: dict[str, dict[str, Any]] = {
    "base-gelu-qkv-bias": {},
    "img24-patch4-1ch-no-qkv-bias-gelu-new": dict(
        image_size=24, patch_size=4, num_channels=1, qkv_bias=False, hidden_act="gelu_new"
    ),
    "relu-eps1e-6-4ch-patch16-2heads-dh12": dict(
        hidden_act="relu",
        layer_norm_eps=1e-6,
        num_channels=4,
        patch_size=16,
        num_attention_heads=2,
        head_dim=12,
    ),
}
LABELS = {0: "cat", 1: "dog", 2: "owl", 3: "eel", 4: "yak"}


@torch.no_grad()
def jitter(model: nn.Module) -> nn.Module:
    """Add noise to norms and biases: HF inits them to 1 and 0, which would hide mapping mix-ups."""
    for param in model.parameters():
        if param.ndim == 1:
            param.add_(0.2 * torch.randn_like(param))
    return model


def make_hf(path: Path, variant: str, cls: type = transformers.ViTForImageClassification, **kw: Any) -> nn.Module:
    """A random tiny HF ViT (classifiers get five named labels) saved to `path`."""
    labels = dict(id2label=LABELS) if cls is transformers.ViTForImageClassification else {}
    model = jitter(cls(transformers.ViTConfig(**{**BASE, **VARIANTS[variant]}, **labels), **kw))
    model.save_pretrained(path)
    return model.eval()


def pixels(model: nn.Module, size: int | None = None) -> Tensor:
    """A batch of three random images sized for the model (or `size` x `size`)."""
    cfg = model.config
    side = size or cfg.image_size
    return torch.randn(3, cfg.num_channels, side, side)


def max_diff(a: Tensor, b: Tensor) -> float:
    """Largest absolute difference; checks the reference is far from zero so a tolerance means something."""
    assert a.shape == b.shape and b.abs().max() > 100 * TOL
    return (a - b).abs().max().item()


@torch.no_grad()
@pytest.mark.parametrize("variant", VARIANTS)
def test_classifier_logits_match_transformers(tmp_path: Path, variant: str) -> None:
    hf = make_hf(tmp_path, variant)
    ours, x = load_hf(tmp_path), pixels(hf)
    assert max_diff(ours(pixel_values=x).logits, hf(pixel_values=x).logits) < TOL


@torch.no_grad()
@pytest.mark.parametrize("variant", VARIANTS)
def test_base_model_states_and_pooler_match_transformers(tmp_path: Path, variant: str) -> None:
    hf = make_hf(tmp_path, variant, transformers.ViTModel)
    ours, x = load_hf(tmp_path), pixels(hf)
    mine, theirs = ours(pixel_values=x), hf(pixel_values=x)
    assert max_diff(mine.last_hidden_state, theirs.last_hidden_state) < TOL
    assert max_diff(mine.pooler_output, theirs.pooler_output) < TOL


@torch.no_grad()
def test_base_model_without_pooler_has_no_pooler_output(tmp_path: Path) -> None:
    hf = make_hf(tmp_path, "base-gelu-qkv-bias", transformers.ViTModel, add_pooling_layer=False)
    ours, x = load_hf(tmp_path), pixels(hf)
    out = ours(pixel_values=x)
    assert ours.pooler is None and out.pooler_output is None
    assert max_diff(out.last_hidden_state, hf(pixel_values=x).last_hidden_state) < TOL


@torch.no_grad()
def test_base_model_reads_a_classifier_checkpoint_backbone(tmp_path: Path) -> None:
    hf = make_hf(tmp_path, "base-gelu-qkv-bias")
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": ["ViTModel"]}))
    ours, x = load_hf(tmp_path), pixels(hf)
    assert ours.pooler is None
    assert max_diff(ours(pixel_values=x).last_hidden_state, hf.vit(pixel_values=x).last_hidden_state) < TOL


@torch.no_grad()
def test_interpolated_positions_match_transformers(tmp_path: Path) -> None:
    hf = make_hf(tmp_path, "base-gelu-qkv-bias", transformers.ViTModel)
    ours, x = load_hf(tmp_path), pixels(hf, size=48)
    mine = ours(pixel_values=x, interpolate_pos_encoding=True).last_hidden_state
    assert mine.shape[1] == 1 + 6 * 6
    assert max_diff(mine, hf(pixel_values=x, interpolate_pos_encoding=True).last_hidden_state) < TOL
    with pytest.raises(ValueError, match=r"Input image size \(48\*48\) doesn't match model \(32\*32\)"):
        ours(pixel_values=x)


@torch.no_grad()
def test_swapping_query_and_key_would_be_caught(tmp_path: Path) -> None:
    """The parity tests can fail: a Q/K/V order other than ours changes the logits well beyond TOL."""
    hf = make_hf(tmp_path, "base-gelu-qkv-bias")
    ours, x = load_hf(tmp_path), pixels(hf)
    for layer in ours.core.backbone.encoder.layers:
        q, k, v = layer.self_attn.qkv.weight.chunk(3)
        layer.self_attn.qkv.weight.copy_(torch.cat((k, q, v)))
    assert max_diff(ours(pixel_values=x).logits, hf(pixel_values=x).logits) > 1e-2


@torch.no_grad()
@pytest.mark.parametrize(
    ("variant", "cls"),
    [
        ("base-gelu-qkv-bias", transformers.ViTForImageClassification),
        ("img24-patch4-1ch-no-qkv-bias-gelu-new", transformers.ViTForImageClassification),
        ("relu-eps1e-6-4ch-patch16-2heads-dh12", transformers.ViTModel),
    ],
)
def test_export_round_trips_and_transformers_loads_it(tmp_path: Path, variant: str, cls: type) -> None:
    hf = make_hf(tmp_path / "in", variant, cls)
    ours = load_hf(tmp_path / "in")
    save_hf(ours, tmp_path / "out")
    again = load_hf(tmp_path / "out")
    mine, theirs = ours.state_dict(), again.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    auto = transformers.AutoModelForImageClassification if "Classification" in cls.__name__ else transformers.AutoModel
    exported = auto.from_pretrained(tmp_path / "out").eval()
    assert type(exported) is cls
    assert exported.config.qkv_bias == hf.config.qkv_bias and exported.config.hidden_act == hf.config.hidden_act
    x = pixels(hf)
    if cls is transformers.ViTModel:
        assert max_diff(exported(pixel_values=x).pooler_output, hf(pixel_values=x).pooler_output) < TOL
    else:
        assert exported.config.id2label == LABELS
        assert max_diff(exported(pixel_values=x).logits, hf(pixel_values=x).logits) < TOL


@torch.no_grad()
def test_a_core_trained_from_scratch_exports_to_transformers(tmp_path: Path) -> None:
    cfg = TransformerConfig.preset("vit-b/16", d_model=32, n_heads=4, n_layers=2, d_ff=64, image_size=32, patch_size=8)
    ours = HFViTModel(ImageEncoder(cfg).eval(), {}).eval()
    save_hf(ours, tmp_path)
    exported = transformers.ViTModel.from_pretrained(tmp_path).eval()
    x = pixels(exported)
    mine, theirs = ours(pixel_values=x), exported(pixel_values=x)
    assert max_diff(mine.last_hidden_state, theirs.last_hidden_state) < TOL
    assert max_diff(mine.pooler_output, theirs.pooler_output) < TOL


def test_export_refuses_a_core_vit_cannot_express() -> None:
    cfg = TransformerConfig.preset("vit-b/16", d_model=32, n_heads=4, n_layers=2, d_ff=64, norm="rmsnorm")
    with pytest.raises(InteropError, match=r"cannot export as ViT: .*'norm': 'rmsnorm'"):
        save_hf(HFViTModel(ImageEncoder(cfg), {}), "unused")


@torch.no_grad()
def test_pytorch_model_bin_loads(tmp_path: Path) -> None:
    hf = make_hf(tmp_path, "img24-patch4-1ch-no-qkv-bias-gelu-new")
    safetensors_to_bin(tmp_path)
    ours, x = load_hf(tmp_path), pixels(hf)
    assert max_diff(ours(pixel_values=x).logits, hf(pixel_values=x).logits) < TOL


def test_mismatched_tensor_names_key_and_both_shapes(tmp_path: Path) -> None:
    make_hf(tmp_path, "base-gelu-qkv-bias")
    weights = load_file(tmp_path / "model.safetensors")
    weights["vit.embeddings.position_embeddings"] = torch.zeros(1, 10, 32)
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        InteropError, match=r"'vit.embeddings.position_embeddings' has shape \(10, 32\), expected \(17, 32\)"
    ):
        load_hf(tmp_path)


def test_missing_qkv_bias_is_named(tmp_path: Path) -> None:
    make_hf(tmp_path, "base-gelu-qkv-bias")
    weights = load_file(tmp_path / "model.safetensors")
    del weights["vit.encoder.layer.1.attention.attention.value.bias"]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(InteropError, match=r"missing tensor 'vit.encoder.layer.1.attention.attention.value.bias'"):
        load_hf(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(hidden_act="quick_gelu"), r"hidden_act='quick_gelu' is not supported; supported: .*'gelu_new'"),
        (dict(image_size=[32, 16]), r"image_size=\[32, 16\]; Tetraformer supports square sizes only"),
        (dict(pooler_act="relu"), r"pooler_act='relu'; Tetraformer supports only \('tanh',\)"),
        (
            dict(architectures=["ViTForMaskedImageModeling"]),
            r"unsupported architecture 'ViTForMaskedImageModeling'",
        ),
    ],
)
def test_unsupported_configs_are_named(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    make_hf(tmp_path, "base-gelu-qkv-bias", transformers.ViTModel)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(InteropError, match=message):
        load_hf(tmp_path)
