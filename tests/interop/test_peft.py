"""PEFT adapter folders both ways, for every family: ours (write_peft, what `convert to-peft` calls) load in
`PeftModel.from_pretrained` with our logits and greedy ids; PEFT's own (peft on the Hugging Face model) load in
ours (read_peft, what `--model.lora.adapters` calls) with PEFT's logits. LoRA, rsLoRA and DoRA each cross over."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from torch import Tensor, nn

from tests.hf_folders import TINY_BERT
from tests.interop.text_checkpoints import TOL, random_hf_model
from tetraformer.core import (
    GenerationConfig,
    Seq2SeqLM,
    SequenceClassifier,
    TokenClassifier,
    TransformerConfig,
    generate,
)
from tetraformer.core.lora import LoRAConfig, apply_lora, lora_layers
from tetraformer.errors import OptionError
from tetraformer.interop import InteropError, export_class, load_hf, save_hf
from tetraformer.interop.peft_export import write_peft
from tetraformer.interop.peft_import import read_peft
from tetraformer.interop.t5 import HFT5ForConditionalGeneration

ALL = ["q", "k", "v", "o", "ff_in", "ff_out"]
LLAMA = dict(
    vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=0,
)  # fmt: skip
LLAMA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
FLAGS = {  # our options, by what each family's direction exercises
    "lora": {},
    "rslora": {"rslora": True},
    "dora": {"dora": True},
    "rslora+dora": {"rslora": True, "dora": True},
}


@dataclass(frozen=True)
class Family:
    """A tiny Hugging Face model, the roles we adapt on it and the same layers as PEFT names them."""

    architecture: str
    config: transformers.PretrainedConfig
    roles: list[str]
    modules: list[str] | str  # PEFT's target_modules for the import (a string: a regex of whole names)
    exported: str  # the FLAGS our adapters are written with
    imported: str  # the FLAGS PEFT's adapters are made with
    head: str | None = None  # a classifier head trained in full (modules_to_save)


FAMILIES = {
    "bert-classifier": Family(
        "BertForSequenceClassification",
        transformers.BertConfig(vocab_size=100, num_labels=3, **TINY_BERT),
        ["q", "k", "v", "o", "ff_in"],
        ["query", "key", "value", "attention.output.dense", "intermediate.dense"],
        "dora",
        "rslora",
        head="classifier",
    ),
    "bert-tagger": Family(
        "BertForTokenClassification",
        transformers.BertConfig(vocab_size=100, num_labels=4, **TINY_BERT),
        ["q", "v", "ff_out"],
        ["query", "value", "output.dense"],
        "lora",
        "dora",
        head="classifier",
    ),
    "gpt2": Family(
        "GPT2LMHeadModel",
        transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, bos_token_id=None, eos_token_id=None),
        ALL,
        ["c_attn", "c_proj", "c_fc"],
        "dora",
        "rslora+dora",
    ),
    "t5": Family(
        "T5ForConditionalGeneration",
        transformers.T5Config(
            vocab_size=100,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            eos_token_id=None,
            decoder_start_token_id=0,
            feed_forward_proj="gated-gelu",
        ),  # fmt: skip
        ALL,
        ["q", "k", "v", "o", "wi_0", "wi_1", "wo"],
        "rslora",
        "dora",
    ),
    "vit": Family(
        "ViTForImageClassification",
        transformers.ViTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
            num_labels=5,
        ),  # fmt: skip
        ["q", "v", "ff_in", "ff_out"],
        r".*\.(query|q_proj|value|v_proj|intermediate\.dense|output\.dense|fc1|fc2)",  # transformers 4 or 5 names
        "dora",
        "lora",
        head="classifier",
    ),
    "llama": Family(
        "LlamaForCausalLM", transformers.LlamaConfig(**LLAMA), [*ALL, "head"], LLAMA_MODULES, "rslora+dora", "rslora"
    ),
    "mistral": Family(
        "MistralForCausalLM", transformers.MistralConfig(sliding_window=4, **LLAMA), ALL, LLAMA_MODULES, "lora", "dora"
    ),
    "qwen2": Family("Qwen2ForCausalLM", transformers.Qwen2Config(**LLAMA), ALL, ["q_proj", "v_proj"], "dora", "lora"),
    "qwen3": Family(
        "Qwen3ForCausalLM",
        transformers.Qwen3Config(head_dim=16, **LLAMA),
        [*ALL, "head"],
        [*LLAMA_MODULES, "lm_head"],
        "lora",
        "rslora+dora",
    ),
}
GENERATIVE = ("gpt2", "t5", "llama", "mistral", "qwen2", "qwen3")


def base_folder(family: Family, path: Path) -> Path:
    """The family's tiny random model (every tensor random, norms and biases too), saved as the base."""
    model = random_hf_model(family.architecture, family.config)
    model.save_pretrained(path)
    return path


def hf_base(family: Family, folder: Path) -> nn.Module:
    """transformers' model of the base folder."""
    return getattr(transformers, family.architecture).from_pretrained(folder).eval()


def our_network(family: Family, folder: Path) -> nn.Module:
    """Our network of the base folder, as a task holds it (a classifier on its backbone, the folder's head)."""
    loaded = load_hf(folder)
    if family.architecture == "BertForSequenceClassification":
        net = SequenceClassifier(loaded.core, family.config.num_labels, pooling="cls", pooler=True)
    elif family.architecture == "BertForTokenClassification":
        net = TokenClassifier(loaded.core, family.config.num_labels)
    else:
        return loaded.core.eval()
    net.head = loaded.head
    return net.eval()


def hf_inputs(config: transformers.PretrainedConfig) -> dict[str, Tensor]:
    """A batch under Hugging Face's names for the family (a private generator)."""
    generator = torch.Generator().manual_seed(0)
    if config.model_type == "vit":
        return {"pixel_values": torch.randn(2, 3, config.image_size, config.image_size, generator=generator)}
    ids = torch.randint(1, config.vocab_size, (2, 7), generator=generator)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if config.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.randint(1, config.vocab_size, (2, 5), generator=generator)
    return inputs


def our_logits(net: nn.Module, inputs: dict[str, Tensor]) -> Tensor:
    """Our network's logits under Hugging Face's input names."""
    with torch.no_grad():
        return export_class(net).from_network(net, {})(**inputs).logits


def their_logits(model: nn.Module, inputs: dict[str, Tensor]) -> Tensor:
    """A transformers (or PEFT) model's logits."""
    with torch.no_grad():
        return model(**inputs).logits


@torch.no_grad()
def train_like(net: nn.Module, family: Family) -> None:
    """Adapters as training leaves them (B and DoRA's magnitudes moved), a classifier's head trained in full."""
    for layer in lora_layers(net):
        for b in layer.lora_b:
            b.normal_(0, 0.3)
        for m in layer.lora_m or []:
            m.mul_(1 + 0.3 * torch.randn_like(m))
    if family.head is not None:
        for param in net.head.parameters():
            param.normal_(0, 0.3).requires_grad_(True)


@torch.no_grad()
def train_peft_like(model: nn.Module) -> None:
    """PEFT's adapters as training leaves them: B, DoRA's magnitudes and the modules_to_save copies moved."""
    for name, param in model.named_parameters():
        if "lora_B" in name or "modules_to_save" in name:
            param.normal_(0, 0.3)
        elif "lora_magnitude_vector" in name:
            param.mul_(1 + 0.3 * torch.randn_like(param))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_our_adapters_load_in_peft_with_our_logits(name: str, tmp_path: Path) -> None:
    """write_peft's folder: PeftModel.from_pretrained on the base gives our logits within 1e-4 (and a generative
    model our greedy ids); the flags and a fresh head (modules_to_save) are in adapter_config.json."""
    family = FAMILIES[name]
    folder = base_folder(family, tmp_path / "base")
    net = our_network(family, folder)
    inputs = hf_inputs(family.config)
    before = our_logits(net, inputs)
    cfg = LoRAConfig(rank=4, alpha=8, targets=family.roles, **FLAGS[family.exported])
    apply_lora(net, cfg)
    train_like(net, family)
    out = write_peft(net, cfg, tmp_path / "peft", str(folder))
    written = json.loads((out / "adapter_config.json").read_text(encoding="utf-8"))
    assert (written["use_rslora"], written["use_dora"]) == (cfg.rslora, cfg.dora)
    assert written["base_model_name_or_path"] == str(folder)
    if family.head is not None:
        assert family.head in written["modules_to_save"], written
    theirs = PeftModel.from_pretrained(hf_base(family, folder), out).eval()
    ours = our_logits(net, inputs)
    assert (ours - before).abs().max() > 100 * TOL  # the adapters change the outputs: equality means something
    torch.testing.assert_close(their_logits(theirs, inputs), ours, rtol=0, atol=TOL)
    if name in GENERATIVE:
        config = GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=None, decoder_start_token_id=0)
        with torch.no_grad():
            expected = theirs.generate(input_ids=inputs["input_ids"], max_new_tokens=8, do_sample=False)
        expected = expected[:, 1:] if family.config.is_encoder_decoder else expected  # less the decoder start
        assert torch.equal(generate(net, inputs["input_ids"], None, config), expected)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_peft_adapters_load_in_ours_with_peft_logits(name: str, tmp_path: Path) -> None:
    """An adapter folder peft makes on the Hugging Face model (its target_modules, flags, modules_to_save): read_peft
    rebuilds it on our network with PEFT's logits within 1e-4."""
    family = FAMILIES[name]
    folder = base_folder(family, tmp_path / "base")
    flags = FLAGS[family.imported]
    peft_cfg = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=family.modules,
        modules_to_save=[family.head] if family.head else None,
        use_rslora=flags.get("rslora", False),
        use_dora=flags.get("dora", False),
    )
    theirs = get_peft_model(hf_base(family, folder), peft_cfg).eval()
    train_peft_like(theirs)
    theirs.save_pretrained(tmp_path / "peft")
    net = our_network(family, folder)
    inputs = hf_inputs(family.config)
    before = our_logits(net, inputs)
    adapters = read_peft(net, tmp_path / "peft", LoRAConfig())
    assert (adapters.config.rslora, adapters.config.dora) == (peft_cfg.use_rslora, peft_cfg.use_dora)
    apply_lora(net, adapters.config)
    adapters.load_into(net)
    ours = our_logits(net, inputs)
    assert (ours - before).abs().max() > 100 * TOL
    torch.testing.assert_close(ours, their_logits(theirs, inputs), rtol=0, atol=TOL)


def test_a_stacked_fused_projection_round_trips(tmp_path: Path) -> None:
    """GPT-2's c_attn holds q, k and v: three rank-4 adapters leave as one of rank 12 (alpha 24, the same scale,
    said in rank_pattern/alpha_pattern) and come back with the same outputs."""
    family = FAMILIES["gpt2"]
    folder = base_folder(family, tmp_path / "base")
    net = our_network(family, folder)
    cfg = LoRAConfig(rank=4, alpha=8, targets=ALL)
    apply_lora(net, cfg)
    train_like(net, family)
    out = write_peft(net, cfg, tmp_path / "peft", str(folder))
    written = json.loads((out / "adapter_config.json").read_text(encoding="utf-8"))
    assert written["rank_pattern"] == {"c_attn": 12} and written["alpha_pattern"] == {"c_attn": 24.0}, written
    back = our_network(family, folder)
    adapters = read_peft(back, out, LoRAConfig())
    apply_lora(back, adapters.config)
    adapters.load_into(back)
    inputs = hf_inputs(family.config)
    torch.testing.assert_close(our_logits(back, inputs), our_logits(net, inputs), rtol=0, atol=TOL)


@pytest.mark.parametrize("dora", [False, True])
def test_rows_the_export_rescales_take_their_adapters_along(tmp_path: Path, dora: bool) -> None:
    """A T5 trained here with scaled attention exports its query weights times 1/sqrt(d_head): the query adapters'
    B rows (and DoRA's magnitudes) are scaled with them, so PEFT on that export gives our logits; read back onto the
    base they are ours again."""
    cfg = TransformerConfig.preset(
        "t5-small", d_model=32, n_heads=4, d_head=8, n_layers=2, d_ff=64, vocab_size=100, dropout=0.0,
        scale_attention=True,
    )  # fmt: skip
    net = Seq2SeqLM(cfg).eval()
    folder = save_hf(HFT5ForConditionalGeneration(net, {}), tmp_path / "base")
    back = copy.deepcopy(net)
    lora = LoRAConfig(rank=4, alpha=8, targets=["q", "k"], dora=dora)
    apply_lora(net, lora)
    train_like(net, FAMILIES["t5"])
    out = write_peft(net, lora, tmp_path / "peft", str(folder))
    theirs = PeftModel.from_pretrained(transformers.T5ForConditionalGeneration.from_pretrained(folder), out).eval()
    inputs = hf_inputs(theirs.config)
    torch.testing.assert_close(their_logits(theirs, inputs), our_logits(net, inputs), rtol=0, atol=TOL)
    adapters = read_peft(back, out, LoRAConfig())
    apply_lora(back, adapters.config)
    adapters.load_into(back)
    torch.testing.assert_close(our_logits(back, inputs), our_logits(net, inputs), rtol=0, atol=TOL)


@pytest.fixture
def peft_folder(tmp_path: Path) -> tuple[Family, Path, Path]:
    """A Llama base folder and a PEFT adapter folder made on it."""
    family = FAMILIES["llama"]
    folder = base_folder(family, tmp_path / "base")
    model = get_peft_model(hf_base(family, folder), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"]))
    model.save_pretrained(tmp_path / "peft")
    return family, folder, tmp_path / "peft"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"target_modules": ["q_proj", "embed_tokens"]}, "target_modules 'embed_tokens'"),
        ({"peft_type": "IA3"}, "peft_type 'IA3'"),
        ({"use_qalora": True}, "use_qalora"),
        ({"bias": "all"}, "bias 'all'"),
        ({"init_lora_weights": "pissa"}, "init_lora_weights 'pissa'"),
    ],
)
def test_an_adapter_config_we_cannot_compute_is_refused(
    peft_folder: tuple[Family, Path, Path], change: dict[str, Any], named: str
) -> None:
    """One line naming adapter_config.json and the key."""
    family, folder, adapters = peft_folder
    path = adapters / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), **change}), encoding="utf-8")
    with pytest.raises(InteropError, match=named) as err:
        read_peft(our_network(family, folder), adapters, LoRAConfig())
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_an_option_the_folder_sets_otherwise_is_refused(peft_folder: tuple[Family, Path, Path]) -> None:
    """--model.lora.rank 8 beside a folder of rank 4: named, with the folder's value; the same value passes."""
    family, folder, adapters = peft_folder
    with pytest.raises(OptionError, match="rank") as err:
        read_peft(our_network(family, folder), adapters, LoRAConfig(rank=8, adapters=str(adapters)))
    assert "adapter_config.json sets it (4)" in err.value.allowed
    assert read_peft(our_network(family, folder), adapters, LoRAConfig(rank=4)).config.targets == ["q"]
