"""Llama-family checkpoints in and out: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM.

All four are pre-RMSNorm causal decoders with rotary positions, grouped-query attention and a SwiGLU MLP,
on the core's CausalLM; they differ in a few fields: Qwen2 biases Q/K/V only, Qwen3 normalises each head's
queries and keys (and sets its own head size), Mistral attends within a sliding window. Q, K and V (rows
n_heads, n_kv_heads and n_kv_heads times head_dim) fuse into our `qkv`, gate_proj and up_proj into `ffn.up`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from tetraformer.core import CausalLM
from tetraformer.core.config import TransformerConfig
from tetraformer.core.rope_scaling import ROPE_OPTIONAL, ROPE_SCALINGS
from tetraformer.interop.errors import InteropError
from tetraformer.interop.mapping import (
    Rule,
    check_supported,
    export_state,
    fused,
    import_model,
    kept_config,
    require,
    resolve_tie,
)
from tetraformer.interop.outputs import ModelOutput
from tetraformer.interop.registry import ExportChoice, FamilySpec, HFModel

# what transformers assumes for an entry config.json leaves out (the four configs agree on these)
DEFAULTS: dict[str, Any] = dict(
    rms_norm_eps=1e-6,
    hidden_act="silu",
    initializer_range=0.02,
    attention_dropout=0.0,
    tie_word_embeddings=False,
    num_key_value_heads=None,
    head_dim=None,
)
EXPORTABLE = dict(
    norm="rmsnorm",
    norm_position="pre",
    embedding_norm=False,
    activation="swiglu",
    position="rotary",
    bias=False,
    type_vocab_size=0,
    scale_embeddings=False,
    scale_attention=True,
    rescale_tied_logits=False,
    n_decoder_layers=0,
    rope_fraction=1.0,
)
LEGACY_ROPE_KEYS = ("rope_theta", "rope_scaling")  # transformers 4's entries; rope_parameters replaces them


@dataclass(frozen=True)
class Variant:
    """What sets one architecture of the family apart: its model_type, config entries and core fields."""

    model_type: str
    supported: dict[str, tuple[Any, ...]]  # config entries the core reproduces only at these values
    fields: dict[str, Any]  # core fields every model of it has
    windowed: bool = False  # reads and writes `sliding_window`
    extra: dict[str, Any] = field(default_factory=dict)  # config.json entries it writes


VARIANTS: dict[str, Variant] = {
    "LlamaForCausalLM": Variant(
        "llama",
        {"attention_bias": (False,), "mlp_bias": (False,), "pretraining_tp": (1,)},
        dict(qkv_bias=False, qk_norm=False, sliding_window=None),
        extra=dict(attention_bias=False, mlp_bias=False),
    ),
    "MistralForCausalLM": Variant("mistral", {}, dict(qkv_bias=False, qk_norm=False), windowed=True),
    "Qwen2ForCausalLM": Variant(
        "qwen2", {"use_sliding_window": (False,)}, dict(qkv_bias=True, qk_norm=False, sliding_window=None)
    ),
    "Qwen3ForCausalLM": Variant(
        "qwen3",
        {"use_sliding_window": (False,), "attention_bias": (False,)},
        dict(qkv_bias=False, qk_norm=True, sliding_window=None),
        extra=dict(attention_bias=False),
    ),
}


def variant_of(hf: dict, source: str) -> tuple[str, Variant]:
    """The architecture a config.json names (or its model_type implies) and its variant."""
    names = [n for n in hf.get("architectures") or [] if n in VARIANTS]
    names += [a for a, v in VARIANTS.items() if v.model_type == hf.get("model_type")]
    if not names:
        raise InteropError(f"{source}: not a Llama-family config (architectures or model_type one of {list(VARIANTS)})")
    return names[0], VARIANTS[names[0]]


def rope_from_hf(hf: dict, source: str) -> tuple[float, dict | None]:
    """(rope_base, rope_scaling) from rope_parameters (transformers 5) or rope_theta / rope_scaling (4)."""
    params = {**(hf.get("rope_scaling") or {}), **(hf.get("rope_parameters") or {})}
    base = float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    if params.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)) != 1.0:
        raise InteropError(f"{source}: config.json sets partial_rotary_factor; this family rotates whole heads")
    if kind == "default":
        return base, None
    if kind not in ROPE_SCALINGS:
        raise InteropError(
            f"{source}: config.json sets rope_type={kind!r}; supported: default, {', '.join(ROPE_SCALINGS)}"
        )
    missing = [k for k in ROPE_SCALINGS[kind] if k not in params]
    if missing:
        raise InteropError(f"{source}: rope_type {kind!r} needs {missing} in config.json's rope_parameters")
    keys = ROPE_SCALINGS[kind] + ROPE_OPTIONAL.get(kind, ())
    return base, {"rope_type": kind, **{k: params[k] for k in keys if params.get(k) is not None}}


def config_from_hf(hf: dict, source: str, tie: bool | None = None) -> TransformerConfig:
    """The core config of a Llama-family config.json (tie: whether the LM head shares the token embedding)."""
    _, variant = variant_of(hf, source)
    check_supported(hf, source, {"hidden_act": ("silu",), **variant.supported})
    hf = {**DEFAULTS, **hf}
    base, scaling = rope_from_hf(hf, source)
    heads = hf["num_attention_heads"]
    fields = dict(
        d_model=hf["hidden_size"],
        n_heads=heads,
        n_kv_heads=hf["num_key_value_heads"] or heads,
        d_head=hf["head_dim"] or hf["hidden_size"] // heads,
        n_layers=hf["num_hidden_layers"],
        d_ff=hf["intermediate_size"],
        vocab_size=hf["vocab_size"],
        max_len=hf.get("max_position_embeddings", 2048),
        norm="rmsnorm",
        norm_eps=hf["rms_norm_eps"],
        activation="swiglu",
        position="rotary",
        bias=False,
        rope_base=base,
        rope_scaling=scaling,
        attn_dropout=hf["attention_dropout"],
        init_std=hf["initializer_range"],
        tie_embeddings=bool(hf["tie_word_embeddings"]) if tie is None else tie,
        **variant.fields,
    )
    if variant.windowed:
        fields["sliding_window"] = hf.get("sliding_window")
    try:
        return TransformerConfig(**fields)
    except ValueError as err:
        raise InteropError(f"{source}: {err}") from err


def config_to_hf(cfg: TransformerConfig, original: dict, architecture: str) -> dict:
    """config.json entries for a core config as `architecture`, over the entries of the checkpoint it came from."""
    variant = VARIANTS[architecture]
    needs = {k: v for k, v in variant.fields.items() if k != "qkv_bias"}
    require(
        cfg,
        architecture.removesuffix("ForCausalLM"),
        {**EXPORTABLE, **needs, "use_qkv_bias": variant.fields["qkv_bias"]},
    )
    rope = {"rope_type": "default", "rope_theta": cfg.rope_base, **(cfg.rope_scaling or {})}
    kept = {k: v for k, v in kept_config(original).items() if k not in LEGACY_ROPE_KEYS}
    config = {
        "bos_token_id": None,
        "eos_token_id": None,  # the family's 1 and 2 would not fit another vocabulary
        **kept,
        "model_type": variant.model_type,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_len,
        "rms_norm_eps": cfg.norm_eps,
        "initializer_range": cfg.init_std,
        "attention_dropout": cfg.attn_dropout,
        "tie_word_embeddings": cfg.tie_embeddings,
        "rope_parameters": rope,
        **variant.extra,
    }
    if variant.windowed:
        config["sliding_window"] = cfg.sliding_window
    return config


def decoder_rules(cfg: TransformerConfig, prefix: str = "model.") -> list[Rule]:
    """Our CausalLM (under `core.`) <- HF's decoder (under `prefix`) and, when untied, its lm_head."""
    rules = [
        Rule("core.embed.tokens.weight", (f"{prefix}embed_tokens.weight",)),
        Rule("core.decoder.final_norm.weight", (f"{prefix}norm.weight",)),
    ]
    q, kv = cfg.inner_dim, cfg.kv_heads * cfg.head_dim
    qkv_names = ("weight", "bias") if cfg.use_qkv_bias else ("weight",)
    for i in range(cfg.n_layers):
        ours, hf = f"core.decoder.layers.{i}.", f"{prefix}layers.{i}."
        attn = tuple(f"{hf}self_attn.{n}_proj" for n in "qkv")
        rules += [
            Rule(f"{ours}norm1.weight", (f"{hf}input_layernorm.weight",)),
            *fused(f"{ours}self_attn.qkv", attn, (q, kv, kv), qkv_names),
            Rule(f"{ours}self_attn.out.weight", (f"{hf}self_attn.o_proj.weight",)),
            Rule(f"{ours}norm2.weight", (f"{hf}post_attention_layernorm.weight",)),
            Rule(f"{ours}ffn.up.weight", (f"{hf}mlp.gate_proj.weight", f"{hf}mlp.up_proj.weight")),
            Rule(f"{ours}ffn.down.weight", (f"{hf}mlp.down_proj.weight",)),
        ]
        if cfg.qk_norm:
            rules += [Rule(f"{ours}self_attn.{n}_norm.weight", (f"{hf}self_attn.{n}_norm.weight",)) for n in "qk"]
    if not cfg.tie_embeddings:
        rules.append(Rule("core.lm_head.proj.weight", ("lm_head.weight",)))
    return rules


class LlamaFamilyForCausalLM(HFModel):
    """A CausalLM behind the family's inputs (input_ids, attention_mask); `core.generate` decodes on the KV cache."""

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> ModelOutput:
        """(B, T) ids and real-token mask -> (B, T, V) logits."""
        return ModelOutput(logits=self.core(input_ids, attention_mask))

    def export_config(self) -> dict:
        """config.json for this model."""
        return config_to_hf(self.core.cfg, self.hf_config, self.architecture)

    def export_weights(self) -> dict[str, Tensor]:
        """HF-named tensors for this model (a tied head is left to transformers to re-tie)."""
        return export_state(self, self.export_rules())

    def export_rules(self) -> list[Rule]:
        """Every tensor's rule, the decoder under `model.`."""
        return decoder_rules(self.core.cfg)


class HFLlamaForCausalLM(LlamaFamilyForCausalLM):
    """LlamaForCausalLM (Llama 2/3.x, SmolLM2, TinyLlama...)."""

    architecture = "LlamaForCausalLM"


class HFMistralForCausalLM(LlamaFamilyForCausalLM):
    """MistralForCausalLM: Llama with sliding-window attention."""

    architecture = "MistralForCausalLM"


class HFQwen2ForCausalLM(LlamaFamilyForCausalLM):
    """Qwen2ForCausalLM (Qwen2, Qwen2.5): Llama with Q/K/V biases."""

    architecture = "Qwen2ForCausalLM"


class HFQwen3ForCausalLM(LlamaFamilyForCausalLM):
    """Qwen3ForCausalLM: Llama with per-head Q/K RMSNorm and its own head size."""

    architecture = "Qwen3ForCausalLM"


def load(cls: type[LlamaFamilyForCausalLM], hf: dict, weights: dict[str, Tensor], source: str) -> HFModel:
    """Build `cls` from a Llama-family config.json and state dict."""
    weights = dict(weights)
    tie = resolve_tie(weights, "lm_head.weight", "model.embed_tokens.weight", bool(hf.get("tie_word_embeddings")))
    model = cls(CausalLM(config_from_hf({**hf, "architectures": [cls.architecture]}, source, tie)), hf)
    import_model(model, decoder_rules(model.core.cfg), weights, source)
    return model


def export_architecture(net: nn.Module) -> str | None:
    """The family member a core CausalLM is (None unless its positions are rotary)."""
    cfg = net.cfg
    if cfg.position != "rotary":
        return None
    if cfg.qk_norm:
        return "Qwen3ForCausalLM"
    if cfg.sliding_window is not None:
        return "MistralForCausalLM"
    return "Qwen2ForCausalLM" if cfg.use_qkv_bias and not cfg.bias else "LlamaForCausalLM"  # biases on Q/K/V only


SPEC = FamilySpec(
    name="Llama",
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    heads=(HFLlamaForCausalLM, HFMistralForCausalLM, HFQwen2ForCausalLM, HFQwen3ForCausalLM),
    load=load,
    exports={CausalLM: ExportChoice(tuple(VARIANTS), export_architecture)},
)
