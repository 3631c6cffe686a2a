"""One registry: one spec per family, and every architecture reachable through load_hf, save_hf and convert."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers
from torch import nn

from tests.interop.text_checkpoints import state_dicts_equal
from tetraformer.core import SequenceClassifier, TokenClassifier
from tetraformer.interop import HFModel, InteropError, architectures, export_class, families, load_hf, save_hf
from tetraformer.interop.convert import export_network
from tetraformer.interop.registry import ExportChoice, export_name

TINY_HF_CONFIGS = {
    "BERT": lambda: transformers.BertConfig(
        vocab_size=60,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    ),
    "GPT-2": lambda: transformers.GPT2Config(vocab_size=60, n_positions=32, n_embd=16, n_layer=1, n_head=2),
    "T5": lambda: transformers.T5Config(vocab_size=60, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2),
    "ViT": lambda: transformers.ViTConfig(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        image_size=16,
        patch_size=8,
    ),
}
LLAMA_SHAPE = dict(
    vocab_size=60,
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
)
TINY_LLAMA_CONFIGS = {  # the Llama family's members each have a config class of their own
    "LlamaForCausalLM": lambda: transformers.LlamaConfig(**LLAMA_SHAPE),
    "MistralForCausalLM": lambda: transformers.MistralConfig(**LLAMA_SHAPE, sliding_window=4),
    "Qwen2ForCausalLM": lambda: transformers.Qwen2Config(**LLAMA_SHAPE),
    "Qwen3ForCausalLM": lambda: transformers.Qwen3Config(**LLAMA_SHAPE, head_dim=4),
}
ARCHITECTURES = sorted(architectures())
EXPORTS = sorted(
    (arch, export_name(key))
    for spec in families().values()
    for key, export in spec.exports.items()
    for arch in (export.architectures if isinstance(export, ExportChoice) else (export,))
)


def saved_hf_model(architecture: str, path: Path) -> Path:
    """A tiny random transformers model of `architecture`, saved to `path`."""
    make = TINY_LLAMA_CONFIGS.get(architecture) or TINY_HF_CONFIGS[architectures()[architecture].name]
    config = make()
    getattr(transformers, architecture)(config).save_pretrained(path)
    return path


def test_one_spec_per_family() -> None:
    """Five families, each architecture in exactly one of them, each a transformers class; a network type (on its
    backbone type) exports through one family only, or through an ExportChoice that picks its family by config
    (a CausalLM: GPT-2 with a learned table, the Llama family with rotary positions)."""
    assert sorted(families()) == ["BERT", "GPT-2", "Llama", "T5", "ViT"]
    heads = [c.architecture for spec in families().values() for c in spec.heads]
    assert len(heads) == len(set(heads)) == len(ARCHITECTURES) >= 10
    assert all(hasattr(transformers, name) for name in heads)
    for spec in families().values():
        assert callable(spec.config_from_hf) and callable(spec.config_to_hf)
        names = {c.architecture for c in spec.heads}
        exports = [e.architectures if isinstance(e, ExportChoice) else (e,) for e in spec.exports.values()]
        assert len(spec.exports) >= 1 and all(set(e) <= names for e in exports)
    fixed = [t for spec in families().values() for t, e in spec.exports.items() if not isinstance(e, ExportChoice)]
    chosen = [t for spec in families().values() for t, e in spec.exports.items() if isinstance(e, ExportChoice)]
    assert len(fixed) == len(set(fixed)) and not set(fixed) & set(chosen)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_architecture_loads_and_saves(architecture: str, tmp_path: Path) -> None:
    """load_hf builds the family's class for it; save_hf writes what transformers loads cleanly as the same class."""
    ours = load_hf(saved_hf_model(architecture, tmp_path / "src"))
    spec = architectures()[architecture]
    assert type(ours) is spec.head(architecture) and ours.architecture == architecture
    out = save_hf(ours, tmp_path / "out")
    assert json.loads((out / "config.json").read_text())["architectures"] == [architecture]
    _, info = getattr(transformers, architecture).from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    assert state_dicts_equal(load_hf(out), ours)


@pytest.mark.parametrize(("architecture", "network"), EXPORTS)
def test_every_exportable_network_converts(architecture: str, network: str, tmp_path: Path) -> None:
    """A family's core network (or a task network on it) exports as its architecture and imports back the same."""
    model = load_hf(saved_hf_model(architecture, tmp_path / "src"))
    net = model.core  # ViTForImageClassification's core is the task network itself
    if network == "SequenceClassifier on TextEncoder":  # the head beside the encoder, as a task network holds it
        net = SequenceClassifier(model.core, model.head.classifier.out_features, pooling="cls", pooler=True)
        net.head = model.head
    if network == "TokenClassifier":
        net = TokenClassifier(model.core, model.head.classifier.out_features)
        net.head = model.head
    assert export_name((type(net), type(net.backbone)) if " on " in network else type(net)) == network
    out = export_network(net, None, tmp_path / "out")
    assert json.loads((out / "config.json").read_text())["architectures"] == [architecture]
    again = load_hf(out)
    assert state_dicts_equal(again.core, model.core)
    if network in ("SequenceClassifier on TextEncoder", "TokenClassifier"):
        assert state_dicts_equal(again.head, model.head)
    getattr(transformers, architecture).from_pretrained(out)


def test_unknown_network_and_foreign_class_are_refused(tmp_path: Path) -> None:
    """A network no family exports, and a class posing as another family's architecture, are named errors."""
    refused = r"no Hugging Face export for this Linear network \(exportable: .*CausalLM"
    with pytest.raises(InteropError, match=refused) as err:
        export_class(nn.Linear(2, 2))
    listed = str(err.value).split("(exportable: ")[1].rstrip(")").split(", ")
    assert len(listed) == len(set(listed)), listed  # a type two families export is named once

    class Impostor(HFModel):
        architecture = "BertModel"

    with pytest.raises(InteropError, match="Impostor is not a BERT model"):
        save_hf(Impostor(nn.Linear(2, 2), {}), tmp_path / "x")


def test_unknown_architecture_lists_the_supported(tmp_path: Path) -> None:
    """config.json naming an architecture no spec has is an error listing every supported one."""
    path = saved_hf_model("GPT2Model", tmp_path / "m")
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "architectures": ["GPT2ForSequenceClassification"]}))
    with pytest.raises(InteropError, match="unsupported architecture 'GPT2ForSequenceClassification'") as err:
        load_hf(path)
    assert all(name in str(err.value) for name in ARCHITECTURES)
