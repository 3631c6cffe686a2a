"""rsLoRA and DoRA compute what PEFT computes on the same weights: outputs, gradients (DoRA's detached norm
included), dropout's path, merged weights; per-layer ranks and alphas match by name as PEFT's patterns do."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from torch import nn

from tetraformer.core.lora import LoRAConfig, LoRALinear, apply_lora, lora_layers, merged_state
from tetraformer.errors import OptionError

VARIANTS = {"rslora": dict(rslora=True), "dora": dict(dora=True), "rslora+dora": dict(rslora=True, dora=True)}


def pair(variant: str, dropout: float = 0.0) -> tuple[nn.Module, LoRALinear]:
    """A PEFT-wrapped Linear (trained-looking B and magnitudes) and our LoRALinear holding the same tensors."""
    options = VARIANTS[variant]
    base = nn.Sequential(nn.Linear(16, 24))
    with torch.no_grad():
        base[0].weight.normal_(0, 0.5)
    peft_cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["0"], lora_dropout=dropout, **_peft_flags(options))
    theirs = get_peft_model(base, peft_cfg)
    layer = theirs.base_model.model[0]
    cfg = LoRAConfig(rank=4, alpha=8, **options)
    ours = LoRALinear(_plain(base[0]), [(0, 24)], 4, cfg.scale(4, 8), dropout, cfg.dora)
    with torch.no_grad():
        layer.lora_B["default"].weight.normal_(0, 0.5)
        if cfg.dora:
            layer.lora_magnitude_vector["default"].weight.mul_(1 + 0.3 * torch.randn(24))
            ours.lora_m[0].copy_(layer.lora_magnitude_vector["default"].weight)
        ours.lora_a[0].copy_(layer.lora_A["default"].weight)
        ours.lora_b[0].copy_(layer.lora_B["default"].weight)
    return theirs, ours


def _peft_flags(options: dict[str, bool]) -> dict[str, bool]:
    """PEFT's names for our options."""
    return {"use_rslora": options.get("rslora", False), "use_dora": options.get("dora", False)}


def _plain(layer: nn.Module) -> nn.Linear:
    """A Linear with copies of a (PEFT-wrapped) layer's base weight and bias."""
    base = getattr(layer, "base_layer", layer)
    plain = nn.Linear(base.in_features, base.out_features)
    with torch.no_grad():
        plain.weight.copy_(base.weight)
        plain.bias.copy_(base.bias)
    return plain


def _trainable(theirs: nn.Module, ours: LoRALinear) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(PEFT's, ours) pairs of the trained tensors: A, B and DoRA's magnitudes."""
    layer = theirs.base_model.model[0]
    pairs = [(layer.lora_A["default"].weight, ours.lora_a[0]), (layer.lora_B["default"].weight, ours.lora_b[0])]
    if ours.lora_m is not None:
        pairs.append((layer.lora_magnitude_vector["default"].weight, ours.lora_m[0]))
    return pairs


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_forward_gradients_and_merged_weight_equal_peft(variant: str) -> None:
    """Same outputs in eval and training mode, same gradients (DoRA's norm detached as PEFT's), same merged weight."""
    theirs, ours = pair(variant)
    x = torch.randn(5, 16)
    expected = theirs.eval()(x)
    torch.testing.assert_close(ours.eval()(x), expected, rtol=0, atol=1e-5)
    assert (expected - nn.functional.linear(x, ours.weight, ours.bias)).abs().max() > 0.1  # the adapter counts
    theirs.train()(x).pow(2).sum().backward()
    ours.train()(x).pow(2).sum().backward()
    for peft_tensor, our_tensor in _trainable(theirs, ours):
        torch.testing.assert_close(our_tensor.grad, peft_tensor.grad, rtol=1e-5, atol=1e-5)
    merged = theirs.merge_and_unload()[0].weight
    torch.testing.assert_close(ours.merged_weight(), merged, rtol=0, atol=1e-5)


def test_dora_dropout_takes_peft_path() -> None:
    """With dropout in training, DoRA's base term is the dropped-out input through the frozen rows, as PEFT does it
    (the same random mask drawn on both sides)."""
    theirs, ours = pair("dora", dropout=0.3)
    x = torch.randn(5, 16)
    torch.manual_seed(1)
    expected = theirs.train()(x)
    torch.manual_seed(1)
    torch.testing.assert_close(ours.train()(x), expected, rtol=0, atol=1e-5)
    torch.manual_seed(1)
    assert not torch.allclose(ours.train()(x), ours.eval()(x), atol=1e-3)  # dropout did act


@pytest.mark.parametrize("options", [dict(dora=True), dict(rslora=True, dora=True)])
def test_dora_merges_unmerges_and_strips_on_every_slice(tiny_model, options: dict[str, bool]) -> None:
    """DoRA on fused q|k|v slices and whole layers: merged and merged_state give the unmerged outputs; unmerging
    gives the adapters back."""
    model = tiny_model("causal", n_kv_heads=1, n_heads=2)
    apply_lora(model, LoRAConfig(rank=2, alpha=4, targets=["q", "v", "ff_in"], **options))
    with torch.no_grad():
        for layer in lora_layers(model):
            for b, m in zip(layer.lora_b, layer.lora_m, strict=True):
                b.normal_(0, 0.3)
                m.mul_(1.5)
    ids = torch.randint(1, 100, (2, 6))
    unmerged = model(ids)
    plain = type(model)(model.cfg).eval()
    plain.load_state_dict(merged_state(model))
    torch.testing.assert_close(plain(ids), unmerged, rtol=0, atol=1e-5)
    for layer in lora_layers(model):
        layer.merge()
    torch.testing.assert_close(model(ids), unmerged, rtol=0, atol=1e-5)
    for layer in lora_layers(model):
        layer.unmerge()
    torch.testing.assert_close(model(ids), unmerged, rtol=0, atol=1e-5)


def test_a_new_dora_adapter_changes_nothing(tiny_model) -> None:
    """B = 0 and m = ||W|| per row: DoRA's start is the base network."""
    model = tiny_model("causal")
    ids = torch.randint(1, 100, (2, 6))
    before = model(ids)
    apply_lora(model, LoRAConfig(rank=2, targets=["q", "k", "v", "o", "ff_in", "ff_out"], dora=True))
    torch.testing.assert_close(model(ids), before, rtol=0, atol=1e-6)


def test_patterns_set_ranks_and_alphas_by_layer_name(tiny_model) -> None:
    """rank_pattern/alpha_pattern match a layer's whole name or a dotted end, the first match winning, as PEFT's."""
    model = tiny_model("causal")
    cfg = LoRAConfig(
        rank=4, alpha=8, targets=["q", "ff_in"], rank_pattern={"layers.1.ffn.up": 2, "up": 6}, alpha_pattern={"up": 3}
    )
    apply_lora(model, cfg)
    layers = {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}
    ranks = {name: layer.lora_a[0].shape[0] for name, layer in layers.items()}
    assert ranks == {
        "decoder.layers.0.self_attn.qkv": 4,
        "decoder.layers.0.ffn.up": 6,
        "decoder.layers.1.self_attn.qkv": 4,
        "decoder.layers.1.ffn.up": 2,
    }
    assert layers["decoder.layers.1.ffn.up"].scale == 3 / 2 and layers["decoder.layers.0.self_attn.qkv"].scale == 2


@pytest.mark.parametrize("field", ["rslora", "dora"])
def test_variants_without_a_rank_are_refused(field: str) -> None:
    """rsLoRA or DoRA beside rank 0 (no LoRA) did nothing: named, with the rank to set."""
    with pytest.raises(OptionError, match=field):
        LoRAConfig(**{field: True})
