"""T5 (v1.0 and v1.1) <-> Seq2SeqLM: HFT5Model and HFT5ForConditionalGeneration.

T5 = RMSNorm pre-norm blocks without biases, unscaled attention scores, and one relative position bias
per stack that Hugging Face keeps in the stack's first self-attention layer. v1.0 uses a ReLU feed-forward
and ties the LM head to the shared embedding, rescaling the decoder output by d_model**-0.5; v1.1 uses a
gated-GELU feed-forward (wi_0 is the gate, wi_1 the value) and an untied, unscaled head.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from tetraformer.core import Seq2SeqLM, TransformerConfig
from tetraformer.interop.errors import InteropError
from tetraformer.interop.mapping import Rule, export_state, import_model, kept_config, require, resolve_tie
from tetraformer.interop.outputs import ModelOutput
from tetraformer.interop.registry import FamilySpec, HFModel

# feed_forward_proj -> the core activation computing the same function, and back
FFN_FROM_HF = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gated-gelu": "geglu_tanh",
    "gated-gelu_new": "geglu_tanh",
    "gated-gelu_pytorch_tanh": "geglu_tanh",
    "gated-silu": "swiglu",
}
FFN_TO_HF = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_tanh": "gelu_new",
    "geglu_tanh": "gated-gelu",
    "swiglu": "gated-silu",
}
# what a core config must hold to be written as T5
T5_SHAPE = dict(
    norm="rmsnorm",
    norm_position="pre",
    position="relative",
    bias=False,
    use_qkv_bias=False,
    scale_embeddings=False,
    embedding_norm=False,
    type_vocab_size=0,
)  # scale_attention is either way: export folds the 1/sqrt(d_head) into the query weights
QUERY_WEIGHTS = ("SelfAttention.q.weight", "EncDecAttention.q.weight")
# copies transformers itself ignores: per-stack embeddings, a tied head, the decoder's unused cross bias
REDUNDANT = (
    "encoder.embed_tokens.weight",
    "decoder.embed_tokens.weight",
    "lm_head.weight",
    "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",
)


class T5Base(HFModel):
    """A Seq2SeqLM behind T5's input names."""

    core: Seq2SeqLM

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> ModelOutput:
        """(B, S) source and (B, T) decoder ids -> the class's output over (B, T, D) final decoder states."""
        if decoder_input_ids is None:
            start = self.hf_config.get("decoder_start_token_id", 0)
            raise ValueError(f"T5 needs decoder_input_ids (start them with decoder_start_token_id={start})")
        memory = self.core.encode(input_ids, attention_mask).last_hidden_state  # (B, S, D)
        out = self.core.decode(decoder_input_ids, memory, attention_mask, decoder_attention_mask)
        return self.output(out.last_hidden_state)

    def output(self, h: Tensor) -> ModelOutput:
        """What this class returns for (B, T, D) decoder states."""
        raise NotImplementedError

    def untied_head(self) -> bool:
        """Whether the LM head has its own matrix (`lm_head.weight`), as v1.1 checkpoints do."""
        return False

    def rules(self, prefix: str) -> list[Rule]:
        """Every tensor of this model and its T5 name(s); the head has a rule only when untied."""
        return rules(self.core.cfg, prefix, head="lm_head.weight" if self.untied_head() else None)

    def export_config(self) -> dict:
        """config.json for this model."""
        return config_to_hf(self.core.cfg, self.hf_config, tied=not self.untied_head())

    def export_rules(self) -> list[Rule]:
        """Every tensor's rule (T5 checkpoints have no prefix)."""
        return self.rules("")

    def export_weights(self) -> dict[str, Tensor]:
        """T5-named tensors for this model; a core that scales scores by 1/sqrt(d_head) has it folded into Q."""
        weights = export_state(self, self.export_rules())
        if self.core.cfg.scale_attention:
            scale = self.core.cfg.head_dim**-0.5  # q.k / sqrt(d) = (q / sqrt(d)).k: T5's own convention
            weights = {k: v * scale if k.endswith(QUERY_WEIGHTS) else v for k, v in weights.items()}
        return weights


class HFT5Model(T5Base):
    """Encoder-decoder without a head: `last_hidden_state` is the decoder's."""

    architecture = "T5Model"

    def output(self, h: Tensor) -> ModelOutput:
        """ModelOutput(last_hidden_state=(B, T, D))."""
        return ModelOutput(last_hidden_state=h)


class HFT5ForConditionalGeneration(T5Base):
    """Encoder-decoder with the LM head: `logits` over the vocabulary at every decoder position."""

    architecture = "T5ForConditionalGeneration"

    def output(self, h: Tensor) -> ModelOutput:
        """ModelOutput(logits=(B, T, V))."""
        return ModelOutput(logits=self.core.lm_head(h))

    def untied_head(self) -> bool:
        """Untied when the core's head does not share the embedding."""
        return not self.core.cfg.tie_embeddings


# --- import ----------------------------------------------------------------------------------------
def config_from_hf(hf: dict, source: str, tied: bool, rescale: bool) -> TransformerConfig:
    """The core config of a T5 config.json (absent entries take T5Config's defaults)."""
    proj = hf.get("feed_forward_proj", "relu")
    if proj not in FFN_FROM_HF:
        raise InteropError(f"{source}: feed_forward_proj={proj!r} is not supported; supported: {sorted(FFN_FROM_HF)}")
    n_layers, rate = hf.get("num_layers", 6), hf.get("dropout_rate", 0.1)
    return TransformerConfig(
        d_model=hf.get("d_model", 512),
        n_heads=hf.get("num_heads", 8),
        d_head=hf.get("d_kv", 64),
        n_layers=n_layers,
        n_decoder_layers=hf.get("num_decoder_layers") or n_layers,
        d_ff=hf.get("d_ff", 2048),
        vocab_size=hf.get("vocab_size", 32128),
        norm="rmsnorm",
        norm_position="pre",
        norm_eps=hf.get("layer_norm_epsilon", 1e-6),
        activation=FFN_FROM_HF[proj],
        position="relative",
        bias=False,
        scale_attention=False,
        init_scheme="t5",
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128),
        dropout=rate,
        attn_dropout=rate,
        ffn_dropout=rate,
        tie_embeddings=tied,
        rescale_tied_logits=rescale,
    )


def scales_decoder_output(hf: dict) -> bool:
    """Whether the LM head sees decoder states times d_model**-0.5, as transformers decides.

    transformers >= 5 writes `scale_decoder_outputs`; older files say it through `tie_word_embeddings`.
    """
    if "scale_decoder_outputs" in hf:
        return bool(hf["scale_decoder_outputs"])
    return hf.get("tie_word_embeddings", True) is not False


def load(cls: type[T5Base], hf: dict, weights: dict[str, Tensor], source: str) -> T5Base:
    """A T5 checkpoint as `cls`; an untied head that is also rescaled gets the scale folded into it."""
    weights = dict(weights)
    tied = cls is HFT5Model or resolve_tie(weights, "lm_head.weight", "shared.weight", True)
    rescale = scales_decoder_output(hf)
    if not tied and rescale:  # the core rescales tied heads only: d**-0.5 * W h = (d**-0.5 W) h
        weights["lm_head.weight"] = weights["lm_head.weight"] * hf.get("d_model", 512) ** -0.5
    model = cls(Seq2SeqLM(config_from_hf(hf, source, tied, rescale and tied)), hf)
    import_model(model, model.rules(""), weights, source, ignored=REDUNDANT)
    return model


def rules(cfg: TransformerConfig, prefix: str, head: str | None) -> list[Rule]:
    """Every core tensor and its T5 name(s) (under `prefix`); the head has a rule only when untied."""
    out = [Rule("core.embed.tokens.weight", (f"{prefix}shared.weight",))]
    if head is not None:
        out.append(Rule("core.lm_head.proj.weight", (head,)))
    for side, n_layers in (("encoder", cfg.n_layers), ("decoder", cfg.n_decoder_layers or cfg.n_layers)):
        out += _stack_rules(side, prefix + side, n_layers, cross=side == "decoder", gated=cfg.gated)
    return out


def _stack_rules(side: str, theirs: str, n_layers: int, cross: bool, gated: bool) -> list[Rule]:
    """One stack (ours `core.{side}`, HF's `theirs`): its blocks, final norm, and the relative bias in block 0."""
    bias = f"{theirs}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    out = [
        Rule(f"core.{side}.position_bias.bias.weight", (bias,)),
        Rule(f"core.{side}.final_norm.weight", (f"{theirs}.final_layer_norm.weight",)),
    ]
    for i in range(n_layers):
        out += _block_rules(f"core.{side}.layers.{i}", f"{theirs}.block.{i}.layer", cross, gated)
    return out


def _block_rules(ours: str, theirs: str, cross: bool, gated: bool) -> list[Rule]:
    """One block: HF sub-layer 0 is self-attention, then cross-attention (decoder), then the feed-forward."""
    att, ffn = f"{theirs}.0.SelfAttention", f"{theirs}.{2 if cross else 1}"
    out = [
        Rule(f"{ours}.norm1.weight", (f"{theirs}.0.layer_norm.weight",)),
        Rule(f"{ours}.self_attn.qkv.weight", (f"{att}.q.weight", f"{att}.k.weight", f"{att}.v.weight")),
        Rule(f"{ours}.self_attn.out.weight", (f"{att}.o.weight",)),
        Rule(f"{ours}.norm2.weight", (f"{ffn}.layer_norm.weight",)),
        Rule(f"{ours}.ffn.down.weight", (f"{ffn}.DenseReluDense.wo.weight",)),
    ]
    up = ("wi_0", "wi_1") if gated else ("wi",)  # gated: wi_0 is the gate, first half of our fused `up`
    out.append(Rule(f"{ours}.ffn.up.weight", tuple(f"{ffn}.DenseReluDense.{w}.weight" for w in up)))
    if cross:
        x = f"{theirs}.1.EncDecAttention"
        out += [
            Rule(f"{ours}.norm_cross.weight", (f"{theirs}.1.layer_norm.weight",)),
            Rule(f"{ours}.cross_attn.q.weight", (f"{x}.q.weight",)),
            Rule(f"{ours}.cross_attn.kv.weight", (f"{x}.k.weight", f"{x}.v.weight")),
            Rule(f"{ours}.cross_attn.out.weight", (f"{x}.o.weight",)),
        ]
    return out


# --- export ----------------------------------------------------------------------------------------
def config_to_hf(cfg: TransformerConfig, original: dict, tied: bool) -> dict[str, Any]:
    """config.json for a core config (tied: the head shares the embedding), over the original's entries."""
    require(cfg, "T5", T5_SHAPE)
    if cfg.activation not in FFN_TO_HF:
        raise InteropError(f"T5 has no {cfg.activation!r} feed-forward; exportable: {sorted(FFN_TO_HF)}")
    proj = FFN_TO_HF[cfg.activation]
    act = proj.split("-")[-1]
    return kept_config(original) | dict(
        model_type="t5",
        is_encoder_decoder=True,
        vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        d_kv=cfg.head_dim,
        d_ff=cfg.d_ff,
        num_layers=cfg.n_layers,
        num_heads=cfg.n_heads,
        num_decoder_layers=cfg.n_decoder_layers or cfg.n_layers,
        layer_norm_epsilon=cfg.norm_eps,
        relative_attention_num_buckets=cfg.relative_buckets,
        relative_attention_max_distance=cfg.relative_max_distance,
        dropout_rate=cfg.dropout,
        feed_forward_proj=proj,
        dense_act_fn="gelu_new" if proj == "gated-gelu" else act,
        is_gated_act=proj.startswith("gated-"),
        tie_word_embeddings=tied,
        scale_decoder_outputs=tied and cfg.rescale_tied_logits,
        pad_token_id=original.get("pad_token_id", 0),
        eos_token_id=original.get("eos_token_id", 1),
        decoder_start_token_id=original.get("decoder_start_token_id", 0),
    )


SPEC = FamilySpec(
    name="T5",
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    heads=(HFT5Model, HFT5ForConditionalGeneration),
    load=load,
    exports={Seq2SeqLM: "T5ForConditionalGeneration"},
)
