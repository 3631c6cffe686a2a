"""BERT import/export against transformers: outputs, padding, round trips, legacy checkpoints, clear errors."""

from __future__ import annotations

import json
import logging
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
from tetraformer.core import TextDecoder, TextEncoder, TokenClassifier, TransformerConfig
from tetraformer.interop import InteropError, ModelOutput, load_hf, save_hf
from tetraformer.interop.bert import HFBertForSequenceClassification
from tetraformer.interop.convert import export_network

BASE: dict[str, Any] = dict(
    vocab_size=100,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "base": ("BertModel", {}),
    "base-relu-eps1e-2": ("BertModel", dict(hidden_act="relu", layer_norm_eps=1e-2)),
    "mlm": ("BertForMaskedLM", {}),
    "mlm-untied-gelu_new": ("BertForMaskedLM", dict(tie_word_embeddings=False, hidden_act="gelu_new")),
    "mlm-3types-eps1e-3": ("BertForMaskedLM", dict(type_vocab_size=3, layer_norm_eps=1e-3)),
    "seq-3labels": ("BertForSequenceClassification", dict(num_labels=3)),
    "seq-regression-relu": ("BertForSequenceClassification", dict(num_labels=1, hidden_act="relu")),
    "tok-5labels-tanh": ("BertForTokenClassification", dict(num_labels=5, hidden_act="gelu_pytorch_tanh")),
    "tok-48wide-4heads-relu": (
        "BertForTokenClassification",
        dict(num_labels=2, hidden_size=48, num_attention_heads=4, intermediate_size=80, hidden_act="relu"),
    ),
}


def make_hf(variant: str, **overrides: Any) -> transformers.PreTrainedModel:
    """A random tiny transformers BERT of a variant."""
    architecture, fields = VARIANTS[variant]
    return random_hf_model(architecture, transformers.BertConfig(**{**BASE, **fields, **overrides}))


def batch(type_vocab: int = 2) -> dict[str, Tensor]:
    """Three rows of 10 tokens, two right-padded, with segment ids (as a tokenizer lays out pairs)."""
    input_ids = torch.randint(1, BASE["vocab_size"], (3, 10))
    mask = torch.ones_like(input_ids)
    mask[1, 7:], mask[2, 4:] = 0, 0
    token_type_ids = (torch.arange(10) >= 5).long().expand(3, -1) * (type_vocab - 1)
    return dict(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids)


@torch.no_grad()
def diff(hf_model: transformers.PreTrainedModel, ours: torch.nn.Module, inputs: dict[str, Tensor]) -> float:
    """Largest |difference| between transformers' outputs and ours over every position.

    BERT's padded positions still attend to the real tokens, so they are compared too.
    """
    return max_diff(hf_model(**inputs), ours(**inputs))


@pytest.mark.parametrize("variant", VARIANTS)
def test_outputs_match_transformers(variant: str, tmp_path: Path) -> None:
    """Logits (or hidden states and pooled output) equal transformers' on a padded batch."""
    hf_model = make_hf(variant)
    ours = load_hf(save(hf_model, tmp_path))
    assert type(ours).architecture == VARIANTS[variant][0]
    assert diff(hf_model, ours, batch(hf_model.config.type_vocab_size)) < TOL


@pytest.mark.parametrize("variant", ["base", "mlm", "mlm-untied-gelu_new", "seq-3labels", "tok-5labels-tanh"])
def test_export_round_trips_and_transformers_loads_it(variant: str, tmp_path: Path) -> None:
    """Export then import gives identical tensors; transformers loads the export cleanly, same outputs."""
    hf_model = make_hf(variant)
    reloaded = export_and_reload(hf_model, VARIANTS[variant][0], tmp_path)
    assert diff(hf_model, reloaded, batch()) < TOL
    assert reloaded.config.num_labels == hf_model.config.num_labels


def test_bin_checkpoint_loads(tmp_path: Path) -> None:
    """A pytorch_model.bin (transformers 4's safe_serialization=False) loads like safetensors."""
    hf_model = make_hf("mlm")
    assert diff(hf_model, load_hf(bin_checkpoint(hf_model, tmp_path)), batch()) < TOL


def test_legacy_checkpoint_with_extra_heads_loads_and_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """TF-era names (gamma/beta), a tied decoder copy, buffers and an NSP head: loads, reports the NSP head."""
    hf_model = make_hf("mlm")
    embedding = hf_model.bert.embeddings.word_embeddings.weight.detach()

    def legacy(weights: dict[str, Tensor]) -> dict[str, Tensor]:
        tf_names = {
            k.replace(".weight", ".gamma").replace(".bias", ".beta") if "LayerNorm" in k else k: v
            for k, v in weights.items()
        }
        return {
            **tf_names,
            "cls.predictions.decoder.weight": embedding.clone(),  # .bin files held tied copies
            "bert.embeddings.position_ids": torch.arange(64)[None],
            "cls.seq_relationship.weight": torch.randn(2, 32),  # BertForPreTraining's NSP head
            "cls.seq_relationship.bias": torch.randn(2),
        }

    path = rewrite_weights(save(hf_model, tmp_path), legacy)
    with caplog.at_level(logging.WARNING, logger="tetraformer.interop"):
        ours = load_hf(path)
    assert diff(hf_model, ours, batch()) < TOL
    assert ours.core.cfg.tie_embeddings
    logged = caplog.text
    assert "cls.seq_relationship.weight" in logged and "ignores 2 tensors" in logged
    assert "position_ids" not in logged and "decoder.weight" not in logged


def test_base_model_without_pooler(tmp_path: Path) -> None:
    """BertModel(add_pooling_layer=False) loads with pooler_output None, as transformers returns."""
    config = transformers.BertConfig(**BASE)
    hf_model = transformers.BertModel(config, add_pooling_layer=False).eval()
    ours = load_hf(save(hf_model, tmp_path))
    assert ours.pooler is None
    assert diff(hf_model, ours, batch()) < TOL


def test_platform_encoder_exports_as_a_classifier(tmp_path: Path) -> None:
    """A TextEncoder built here, with a fresh classifier, exports to a directory transformers reads alike."""
    cfg = TransformerConfig.preset("bert-base", d_model=32, n_heads=4, n_layers=2, d_ff=48, vocab_size=100, max_len=32)
    ours = HFBertForSequenceClassification(TextEncoder(cfg), {"id2label": {0: "neg", 1: "pos", 2: "mixed"}}).eval()
    reloaded = transformers.BertForSequenceClassification.from_pretrained(save_hf(ours, tmp_path)).eval()
    assert reloaded.config.id2label == {0: "neg", 1: "pos", 2: "mixed"}
    assert diff(reloaded, ours, batch()) < TOL


NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def test_token_classifier_exports_as_bert_for_token_classification(tmp_path: Path) -> None:
    """A random core TokenClassifier exports with its tag names; transformers gives its logits on a padded batch."""
    cfg = TransformerConfig.preset("bert-base", d_model=32, n_heads=4, n_layers=2, d_ff=48, vocab_size=100, max_len=32)
    net = TokenClassifier(TextEncoder(cfg), len(NER_LABELS)).eval()
    with torch.no_grad():
        for param in net.parameters():  # biases and norms too, so a swapped or dropped tensor shows
            param.normal_(0.0, 0.2)
    out = export_network(net, None, tmp_path / "out", NER_LABELS)
    theirs, info = transformers.BertForTokenClassification.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    assert theirs.config.id2label == dict(enumerate(NER_LABELS))
    assert theirs.config.label2id == {name: i for i, name in enumerate(NER_LABELS)}
    inputs = batch()
    with torch.no_grad():
        ours = ModelOutput(
            logits=net(
                inputs["input_ids"], attention_mask=inputs["attention_mask"], token_type_ids=inputs["token_type_ids"]
            )
        )
        assert max_diff(theirs.eval()(**inputs), ours) < TOL
    again = save_hf(load_hf(out), tmp_path / "again")  # the names survive an import and a second export
    assert json.loads((again / "config.json").read_text())["id2label"] == {str(i): n for i, n in enumerate(NER_LABELS)}


def test_token_classifier_on_a_decoder_is_refused(tmp_path: Path) -> None:
    """Only an encoder backbone is a BERT: a token classifier on a causal decoder is a named error."""
    cfg = TransformerConfig.preset("tiny", vocab_size=50)
    with pytest.raises(InteropError, match="only a token classifier on an encoder backbone"):
        export_network(TokenClassifier(TextDecoder(cfg), 3), None, tmp_path / "out", ["O", "B-X", "I-X"])


def test_hf_token_classifier_imports_with_its_tag_names(tmp_path: Path) -> None:
    """A random transformers BertForTokenClassification with NER labels: same logits, same names after import."""
    id2label = dict(enumerate(NER_LABELS))
    hf_model = make_hf("tok-5labels-tanh", id2label=id2label, label2id={v: k for k, v in id2label.items()})
    ours = load_hf(save(hf_model, tmp_path))
    assert diff(hf_model, ours, batch()) < TOL
    assert ours.export_config()["id2label"] == {str(i): n for i, n in id2label.items()}


def test_pre_norm_encoder_cannot_export_as_bert(tmp_path: Path) -> None:
    """Exporting a model BERT cannot express names the field and both values."""
    cfg = TransformerConfig.preset("tiny", type_vocab_size=2)  # pre-norm, no embedding norm
    with pytest.raises(InteropError, match=r"cannot export as BERT.*'norm_position': 'pre'.*'norm_position': 'post'"):
        save_hf(HFBertForSequenceClassification(TextEncoder(cfg), {}), tmp_path)


def test_loaded_model_is_in_eval_mode_and_tokenizer_files_travel(tmp_path: Path) -> None:
    """load_hf returns eval mode; save_hf copies the source directory's tokenizer files."""
    path = save(make_hf("seq-3labels"), tmp_path / "src")
    (path / "vocab.txt").write_text("[PAD]\n[UNK]\nhello\n", encoding="utf-8")
    ours = load_hf(path)
    assert not any(m.training for m in ours.modules())
    out = save_hf(ours, tmp_path / "out")
    assert (out / "vocab.txt").read_text(encoding="utf-8") == "[PAD]\n[UNK]\nhello\n"
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]


def test_unsupported_architecture_is_named(tmp_path: Path) -> None:
    """A class without a converter is an error listing the supported ones."""
    path = save(make_hf("base"), tmp_path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "architectures": ["BertForQuestionAnswering"]}))
    with pytest.raises(InteropError, match=r"unsupported architecture 'BertForQuestionAnswering'.*'BertModel'"):
        load_hf(path)


def test_missing_weights_file_is_named(tmp_path: Path) -> None:
    """A directory with config.json but no weights says which files it looked for."""
    path = save(make_hf("base"), tmp_path)
    (path / "model.safetensors").unlink()
    with pytest.raises(InteropError, match=r"no model.safetensors or pytorch_model.bin"):
        load_hf(path)


def test_mismatched_tensor_names_key_and_both_shapes(tmp_path: Path) -> None:
    """A tensor of the wrong shape is an error naming the key, its shape and the expected one."""
    key = "bert.encoder.layer.1.attention.self.key.weight"
    path = rewrite_weights(save(make_hf("mlm"), tmp_path), lambda w: {**w, key: torch.zeros(16, 32)})
    with pytest.raises(InteropError, match=rf"'{key}' has shape \(16, 32\), expected \(32, 32\)"):
        load_hf(path)


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    """A needed tensor that is absent is an error naming it."""
    key = "classifier.bias"
    path = rewrite_weights(
        save(make_hf("tok-5labels-tanh"), tmp_path), lambda w: {k: v for k, v in w.items() if k != key}
    )
    with pytest.raises(InteropError, match=rf"missing tensor '{key}'"):
        load_hf(path)


@pytest.mark.parametrize(
    ("field", "value"),
    [("position_embedding_type", "relative_key"), ("is_decoder", True), ("hidden_act", "quick_gelu")],
)
def test_unsupported_config_is_named(field: str, value: Any, tmp_path: Path) -> None:
    """Settings the core cannot reproduce are errors naming the config entry and its value."""
    path = save(make_hf("mlm"), tmp_path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(InteropError, match=rf"{field}={value!r}"):
        load_hf(path)
