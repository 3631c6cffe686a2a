"""GPT-2 checkpoints in and out: GPT2Model and GPT2LMHeadModel, both on the core's CausalLM.

GPT-2 is a pre-norm causal decoder with learned positions and a final LayerNorm. Its Conv1D layers
store weights as (in, out), so every projection is transposed on the way in and out; `c_attn` is
already Q, K, V concatenated along the output dimension, as our fused `qkv` is.
"""

from __future__ import annotations

from functools import partial

from torch import Tensor

from tetraformer.core import CausalLM
from tetraformer.core.config import TransformerConfig
from tetraformer.interop.errors import InteropError
from tetraformer.interop.mapping import (
    Rule,
    activation_from_hf,
    activation_to_hf,
    base_prefix,
    check_supported,
    export_state,
    import_model,
    kept_config,
    require,
    resolve_tie,
    weight_and_bias,
)
from tetraformer.interop.outputs import ModelOutput
from tetraformer.interop.registry import ExportChoice, FamilySpec, HFModel

# GPT2Config's defaults: what transformers assumes for an entry config.json leaves out
DEFAULTS = dict(
    vocab_size=50257,
    n_positions=1024,
    n_embd=768,
    n_layer=12,
    n_head=12,
    n_inner=None,
    activation_function="gelu_new",
    resid_pdrop=0.1,
    attn_pdrop=0.1,
    layer_norm_epsilon=1e-5,
    initializer_range=0.02,
    scale_attn_weights=True,
    tie_word_embeddings=True,
)
# reorder_and_upcast_attn only changes mixed-precision arithmetic, so any value loads
SUPPORTED = {"scale_attn_by_inverse_layer_idx": (False,), "add_cross_attention": (False,)}
EXPORTABLE = dict(
    norm="layernorm",
    norm_position="pre",
    embedding_norm=False,
    position="learned",
    bias=True,
    use_qkv_bias=True,
    type_vocab_size=0,
    scale_embeddings=False,
    rescale_tied_logits=False,
    n_decoder_layers=0,
)


def config_from_hf(hf: dict, source: str, tie: bool = True) -> TransformerConfig:
    """The core config of a GPT-2 config.json (tie: whether the LM head shares the token embedding)."""
    check_supported(hf, source, SUPPORTED)
    hf = {**DEFAULTS, **hf}
    d, act = hf["n_embd"], activation_from_hf(hf["activation_function"], "activation_function", source)
    fields = dict(
        d_model=d,
        n_heads=hf["n_head"],
        n_layers=hf["n_layer"],
        d_ff=hf["n_inner"] or 4 * d,
        vocab_size=hf["vocab_size"],
        max_len=hf["n_positions"],
        norm_position="pre",
        norm_eps=hf["layer_norm_epsilon"],
        activation=act,
        position="learned",
        dropout=hf["resid_pdrop"],
        attn_dropout=hf["attn_pdrop"],
        scale_attention=bool(hf["scale_attn_weights"]),
        init_std=hf["initializer_range"],
        scaled_residual_init=True,
        tie_embeddings=tie,
    )
    try:
        return TransformerConfig(**fields)
    except ValueError as err:
        raise InteropError(f"{source}: {err}") from err


def config_to_hf(cfg: TransformerConfig, original: dict) -> dict:
    """config.json entries for a core config, over the entries of the checkpoint it came from."""
    require(cfg, "GPT-2", {**EXPORTABLE, "inner_dim": cfg.d_model})
    return {
        "bos_token_id": None,
        "eos_token_id": None,  # GPT2Config's 50256 would not fit another vocabulary
        **kept_config(original),
        "model_type": "gpt2",
        "vocab_size": cfg.vocab_size,
        "n_embd": cfg.d_model,
        "n_layer": cfg.n_layers,
        "n_head": cfg.n_heads,
        "n_inner": cfg.d_ff,
        "n_positions": cfg.max_len,
        "activation_function": activation_to_hf(cfg.activation, original.get("activation_function"), "GPT-2"),
        "resid_pdrop": cfg.dropout,
        "embd_pdrop": cfg.dropout,
        "attn_pdrop": cfg.attn_dropout,
        "layer_norm_epsilon": cfg.norm_eps,
        "initializer_range": cfg.init_std,
        "scale_attn_weights": cfg.scale_attention,
        "scale_attn_by_inverse_layer_idx": False,
        "add_cross_attention": False,
        "tie_word_embeddings": cfg.tie_embeddings,
    }


def decoder_rules(n_layers: int, prefix: str) -> list[Rule]:
    """Our CausalLM's embeddings, layers and final norm (under `core.`) <- HF's (under `prefix`)."""
    rules = [
        Rule("core.embed.tokens.weight", (f"{prefix}wte.weight",)),
        Rule("core.embed.positions.weight", (f"{prefix}wpe.weight",)),
        *weight_and_bias("core.decoder.final_norm", f"{prefix}ln_f"),
    ]
    conv = partial(weight_and_bias, transpose=True)  # Conv1D: (in, out) weights
    for i in range(n_layers):
        ours, hf = f"core.decoder.layers.{i}.", f"{prefix}h.{i}."
        rules += weight_and_bias(f"{ours}norm1", f"{hf}ln_1")
        rules += conv(f"{ours}self_attn.qkv", f"{hf}attn.c_attn")
        rules += conv(f"{ours}self_attn.out", f"{hf}attn.c_proj")
        rules += weight_and_bias(f"{ours}norm2", f"{hf}ln_2")
        rules += conv(f"{ours}ffn.up", f"{hf}mlp.c_fc")
        rules += conv(f"{ours}ffn.down", f"{hf}mlp.c_proj")
    return rules


class GPT2Base(HFModel):
    """A CausalLM behind GPT-2's inputs (input_ids, attention_mask, position_ids; no cache)."""

    base_prefix = "transformer."  # where GPT2LMHeadModel keeps the decoder in a checkpoint

    def features(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, position_ids: Tensor | None = None
    ) -> Tensor:
        """(B, T) ids, real-token mask, optional positions -> (B, T, D) final hidden states (after ln_f)."""
        return self.core.forward_features(input_ids, attention_mask, position_ids=position_ids).last_hidden_state

    def rules(self, prefix: str) -> list[Rule]:
        """Every tensor of this model and its HF name(s), the decoder under `prefix`."""
        return decoder_rules(self.core.cfg.n_layers, prefix)

    def export_config(self) -> dict:
        """config.json for this model."""
        return config_to_hf(self.core.cfg, self.hf_config)

    def export_weights(self) -> dict[str, Tensor]:
        """HF-named tensors for this model (a tied head is left to transformers to re-tie)."""
        return export_state(self, self.export_rules())

    def export_rules(self) -> list[Rule]:
        """Every tensor's rule, the backbone under `base_prefix`."""
        return self.rules(self.base_prefix)


class HFGPT2Model(GPT2Base):
    """GPT2Model: final hidden states (the core's tied LM head goes unused)."""

    architecture = "GPT2Model"
    base_prefix = ""

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, position_ids: Tensor | None = None
    ) -> ModelOutput:
        """(B, T) inputs -> last_hidden_state (B, T, D)."""
        return ModelOutput(last_hidden_state=self.features(input_ids, attention_mask, position_ids))

    def export_config(self) -> dict:
        """config.json, keeping the checkpoint's tie flag (a base model has no head to tie)."""
        return {
            **super().export_config(),
            "tie_word_embeddings": self.hf_config.get("tie_word_embeddings", True),
        }


class HFGPT2LMHeadModel(GPT2Base):
    """GPT2LMHeadModel: next-token logits; `tetraformer.core.generate(model.core, ...)` decodes on the KV cache."""

    architecture = "GPT2LMHeadModel"

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, position_ids: Tensor | None = None
    ) -> ModelOutput:
        """(B, T) inputs -> (B, T, V) logits."""
        return ModelOutput(logits=self.core.lm_head(self.features(input_ids, attention_mask, position_ids)))

    def rules(self, prefix: str) -> list[Rule]:
        """The decoder's rules, plus the output matrix when it is not the token embedding."""
        head = [] if self.core.cfg.tie_embeddings else [Rule("core.lm_head.proj.weight", ("lm_head.weight",))]
        return super().rules(prefix) + head


def load(cls: type[GPT2Base], hf: dict, weights: dict[str, Tensor], source: str) -> GPT2Base:
    """Build `cls` from a GPT-2 config.json and state dict, with or without the `transformer.` prefix."""
    weights = dict(weights)
    prefix = base_prefix(weights, "transformer.")
    tie = resolve_tie(weights, "lm_head.weight", f"{prefix}wte.weight", bool(hf.get("tie_word_embeddings", True)))
    tie = tie or cls is HFGPT2Model  # a base model has no head: keep the core's head a free alias
    model = cls(CausalLM(config_from_hf(hf, source, tie)), hf)
    import_model(model, model.rules(prefix), weights, source)
    return model


SPEC = FamilySpec(
    name="GPT-2",
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    heads=(HFGPT2Model, HFGPT2LMHeadModel),
    load=load,
    exports={
        CausalLM: ExportChoice(
            ("GPT2LMHeadModel",), lambda net: None if net.cfg.position == "rotary" else "GPT2LMHeadModel"
        )
    },
)
