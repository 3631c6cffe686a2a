"""LoRA adapters: roles find their layers in every family, a new adapter changes nothing, merging is exact."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tetraformer.core.lora import (
    LoRAConfig,
    LoRALinear,
    apply_lora,
    lora_disabled,
    lora_layers,
    merge_lora,
    merged_state,
    parameter_counts,
    unmerge_lora,
)
from tetraformer.core.models import SequenceClassifier
from tetraformer.errors import ConfigError, OptionError

ALL = ["q", "k", "v", "o", "ff_in", "ff_out"]


def _inputs(model: nn.Module, family: str) -> tuple[torch.Tensor, ...]:
    """A batch the family's forward takes."""
    if family == "image":
        return (torch.randn(2, 3, 32, 32),)
    ids = torch.randint(1, 100, (2, 7))
    return (ids, torch.randint(1, 100, (2, 5))) if family == "seq2seq" else (ids,)


def _logits(model: nn.Module, family: str, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The output tensor of a forward pass (a backbone's last hidden state)."""
    out = model(*inputs)
    return getattr(out, "last_hidden_state", out)


def _train_adapters(model: nn.Module) -> None:
    """Give every adapter non-zero B, as training would."""
    with torch.no_grad():
        for layer in lora_layers(model):
            for b in layer.lora_b:
                b.normal_(0, 0.2)


@pytest.mark.parametrize("family", ["encoder", "causal", "seq2seq", "image"])
def test_new_adapter_leaves_outputs_unchanged(tiny_model, family: str) -> None:
    """B starts at zero: the adapted network computes what the base did, in every family."""
    model = tiny_model(family)
    inputs = _inputs(model, family)
    before = _logits(model, family, inputs)
    names = apply_lora(model, LoRAConfig(rank=4, targets=ALL))
    assert names and all(isinstance(model.get_submodule(n), LoRALinear) for n in names)
    torch.testing.assert_close(_logits(model, family, inputs), before, rtol=0, atol=0)


@pytest.mark.parametrize("family", ["encoder", "causal", "seq2seq", "image"])
def test_merged_equals_unmerged_fp32(tiny_model, family: str) -> None:
    """Folding trained adapters into the weights gives the same outputs within 1e-5, and unmerging undoes it."""
    model = tiny_model(family)
    apply_lora(model, LoRAConfig(rank=4, alpha=8, targets=["q", "v", "o", "ff_in", "ff_out"]))
    _train_adapters(model)
    inputs = _inputs(model, family)
    unmerged = _logits(model, family, inputs)
    assert not torch.allclose(unmerged, _logits(type(model)(model.cfg).eval(), family, inputs))
    merge_lora(model)
    torch.testing.assert_close(_logits(model, family, inputs), unmerged, rtol=0, atol=1e-5)
    unmerge_lora(model)
    torch.testing.assert_close(_logits(model, family, inputs), unmerged, rtol=0, atol=1e-5)


def test_merged_equals_unmerged_bf16(tiny_model) -> None:
    """In bf16 the merge happens in fp32 and is cast once: merged logits agree within bf16 rounding."""
    model = tiny_model("causal")
    apply_lora(model, LoRAConfig(rank=8, alpha=16, targets=ALL))
    _train_adapters(model)
    model = model.to(torch.bfloat16)
    ids = torch.randint(1, 100, (2, 9))
    unmerged = model(ids).float()
    merge_lora(model)
    merged = model(ids).float()
    scale = unmerged.abs().max()
    assert (merged - unmerged).abs().max() <= 0.05 * scale  # a few bf16 ulps of the logits' range
    assert (merged - unmerged).abs().mean() <= 0.01 * scale


def test_merged_state_loads_into_a_plain_network(tiny_model) -> None:
    """merged_state has the plain network's keys and reproduces the adapted outputs there."""
    model = tiny_model("causal")
    apply_lora(model, LoRAConfig(rank=4, targets=ALL))
    _train_adapters(model)
    ids = torch.randint(1, 100, (2, 6))
    plain = type(model)(model.cfg).eval()
    plain.load_state_dict(merged_state(model))
    torch.testing.assert_close(plain(ids), model(ids), rtol=0, atol=1e-5)


def test_base_frozen_adapters_train_with_activation_checkpointing(tiny_model) -> None:
    """Only adapters require grad; with activation checkpointing every adapter still gets a gradient."""
    model = tiny_model("causal", activation_checkpointing=True).train()
    apply_lora(model, LoRAConfig(rank=4, targets=ALL))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_a." in n or ".lora_b." in n for n in trainable)
    model(torch.randint(1, 100, (2, 6))).sum().backward()
    for layer in lora_layers(model):
        assert all(b.grad is not None and b.grad.abs().sum() > 0 for b in layer.lora_b)
    assert all(p.grad is None for n, p in model.named_parameters() if n not in trainable)


def test_fused_qkv_adapts_only_the_named_slices(tiny_model) -> None:
    """Targeting q and v on the fused projection adapts those output slices and leaves k's unchanged."""
    model = tiny_model("causal")
    apply_lora(model, LoRAConfig(rank=2, targets=["q", "v"]))
    qkv = model.decoder.layers[0].self_attn.qkv
    inner = model.cfg.inner_dim
    assert qkv.slices == [(0, inner), (2 * inner, 3 * inner)]
    _train_adapters(model)
    x = torch.randn(3, model.cfg.d_model)
    delta = qkv(x) - nn.functional.linear(x, qkv.weight, qkv.bias)
    assert delta[:, inner : 2 * inner].abs().max() == 0
    assert delta[:, :inner].abs().max() > 0 and delta[:, 2 * inner :].abs().max() > 0


def test_counts_and_head_role(tiny_model, tiny_config) -> None:
    """The head role adapts the classifier's Linear layers; parameter counts see only adapters as trainable."""
    model = SequenceClassifier(tiny_model("encoder"), num_classes=3, pooler=True)
    names = apply_lora(model, LoRAConfig(rank=2, targets=["head"]))
    assert names == ["head.classifier", "head.pooler.0"]
    trainable, total = parameter_counts(model)
    assert trainable == 2 * (32 + 3) + 2 * (32 + 32)
    assert total == trainable + sum(
        p.numel() for p in SequenceClassifier(tiny_model("encoder"), 3, pooler=True).parameters()
    )


def test_tied_head_is_refused(tiny_model) -> None:
    """An LM head tied to the embedding cannot be merged without changing the embedding: a one-line error."""
    model = tiny_model("causal", tie_embeddings=True)
    with pytest.raises(ConfigError, match="tied"):
        apply_lora(model, LoRAConfig(rank=2, targets=["head"]))


@pytest.mark.parametrize(
    ("field", "value"), [("rank", -1), ("alpha", 0), ("dropout", 1.0), ("targets", ["attn"]), ("save", "all")]
)
def test_bad_options(field: str, value: object) -> None:
    """Each bad option names itself."""
    with pytest.raises(OptionError, match=field):
        LoRAConfig(**{field: value})


@pytest.mark.parametrize(
    ("field", "value"), [("alpha", 32.0), ("dropout", 0.1), ("targets", ["q"]), ("save", "merged")]
)
def test_lora_options_without_a_rank_are_refused(field: str, value: object) -> None:
    """Rank 0 trains the whole network: a LoRA option set beside it did nothing, so it names itself and the rank."""
    with pytest.raises(OptionError, match=field) as err:
        LoRAConfig(**{field: value})
    assert "--model.lora.rank is 0" in err.value.allowed and "--model.lora.rank 8" in err.value.allowed
    LoRAConfig(rank=4, **{field: value})  # with a rank the same option is taken


def test_llama_shaped_decoder_takes_lora_on_every_role(tiny_model) -> None:
    """Grouped-query attention (q | k | v of unequal widths), q/k norms and RoPE scaling: a new adapter changes
    nothing, and merged trained adapters give the unmerged outputs."""
    shape = {
        "n_heads": 4,
        "n_kv_heads": 2,
        "qk_norm": True,
        "norm": "rmsnorm",
        "activation": "swiglu",
        "position": "rotary",
        "bias": False,
        "rope_scaling": {"rope_type": "linear", "factor": 2.0},
    }
    model = tiny_model("causal", **shape)
    inputs = _inputs(model, "causal")
    before = _logits(model, "causal", inputs)
    apply_lora(model, LoRAConfig(rank=4, alpha=8, targets=ALL))
    torch.testing.assert_close(_logits(model, "causal", inputs), before, rtol=0, atol=0)
    _train_adapters(model)
    unmerged = _logits(model, "causal", inputs)
    assert not torch.allclose(unmerged, before)
    merge_lora(model)
    torch.testing.assert_close(_logits(model, "causal", inputs), unmerged, rtol=0, atol=1e-5)


def test_untied_head_adapts_and_merges(tiny_model) -> None:
    """An untied LM head takes an adapter like any layer, and merges exactly."""
    model = tiny_model("causal", tie_embeddings=False)
    assert apply_lora(model, LoRAConfig(rank=2, targets=["head"])) == ["lm_head.proj"]
    _train_adapters(model)
    ids = torch.randint(1, 100, (2, 6))
    unmerged = model(ids)
    merge_lora(model)
    torch.testing.assert_close(model(ids), unmerged, rtol=0, atol=1e-5)


def test_lora_disabled_runs_the_base_and_restores_the_adapters() -> None:
    """Inside lora_disabled the network gives the base's outputs; after it, the adapters' outputs again."""
    base = nn.Sequential(nn.Linear(8, 8))
    x = torch.randn(3, 8)
    expected = base(x)
    adapted_layer = LoRALinear(base[0], [(0, 8)], rank=2, scale=8.0)
    nn.init.normal_(adapted_layer.lora_b[0])
    base[0] = adapted_layer
    adapted = base(x)
    assert not torch.allclose(adapted, expected)
    with lora_disabled(base):
        torch.testing.assert_close(base(x), expected)
    torch.testing.assert_close(base(x), adapted)
