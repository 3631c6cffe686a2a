"""BERT checkpoints in and out: BertModel, BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification.

Every class runs the core's TextEncoder (post-norm, normalised embeddings, learned positions, segments)
under Hugging Face's input names; heads sit beside it: the tanh pooler, the classifiers. BertForMaskedLM's
core is the whole MaskedLM (encoder + MLM head), the network a masked-LM checkpoint stores.
"""

from __future__ import annotations

import logging
from pathlib import Path

from torch import Tensor, nn

from tetraformer.core import (
    ClassificationHead,
    MaskedLM,
    SequenceClassifier,
    TextEncoder,
    TokenClassificationHead,
    TokenClassifier,
)
from tetraformer.core.config import TransformerConfig
from tetraformer.interop.errors import InteropError
from tetraformer.interop.heads import (
    classifier_dropout,
    has_pooler,
    labels,
    num_labels,
    pooler_rules,
    tanh_pooler,
)
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
from tetraformer.interop.registry import FamilySpec, HFModel

log = logging.getLogger(__name__)

# BertConfig's defaults: what transformers assumes for an entry config.json leaves out
DEFAULTS = dict(
    vocab_size=30522,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    hidden_act="gelu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    max_position_embeddings=512,
    type_vocab_size=2,
    initializer_range=0.02,
    layer_norm_eps=1e-12,
    tie_word_embeddings=True,
)
SUPPORTED = {
    "position_embedding_type": ("absolute",),
    "is_decoder": (False,),
    "add_cross_attention": (False,),
}
EXPORTABLE = dict(
    norm="layernorm",
    norm_position="post",
    embedding_norm=True,
    position="learned",
    bias=True,
    use_qkv_bias=True,
    scale_attention=True,
    scale_embeddings=False,
    n_decoder_layers=0,
)
HEAD_PREFIX = "cls.predictions."


def config_from_hf(hf: dict, source: str, tie: bool = True) -> TransformerConfig:
    """The core config of a BERT config.json (tie: whether the MLM decoder shares the word embeddings)."""
    check_supported(hf, source, SUPPORTED)
    hf = {**DEFAULTS, **hf}
    fields = dict(
        d_model=hf["hidden_size"],
        n_heads=hf["num_attention_heads"],
        n_layers=hf["num_hidden_layers"],
        d_ff=hf["intermediate_size"],
        vocab_size=hf["vocab_size"],
        type_vocab_size=hf["type_vocab_size"],
        max_len=hf["max_position_embeddings"],
        norm_position="post",
        norm_eps=hf["layer_norm_eps"],
        embedding_norm=True,
        activation=activation_from_hf(hf["hidden_act"], "hidden_act", source),
        position="learned",
        dropout=hf["hidden_dropout_prob"],
        attn_dropout=hf["attention_probs_dropout_prob"],
        init_std=hf["initializer_range"],
        tie_embeddings=tie,
    )
    try:
        return TransformerConfig(**fields)
    except ValueError as err:
        raise InteropError(f"{source}: {err}") from err


def config_to_hf(cfg: TransformerConfig, original: dict) -> dict:
    """config.json entries for a core config, over the entries of the checkpoint it came from."""
    require(cfg, "BERT", {**EXPORTABLE, "inner_dim": cfg.d_model})
    if cfg.type_vocab_size < 1:
        raise InteropError("cannot export as BERT: the model has no segment embedding (type_vocab_size=0)")
    return {
        **kept_config(original),
        "model_type": "bert",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "intermediate_size": cfg.d_ff,
        "hidden_act": activation_to_hf(cfg.activation, original.get("hidden_act"), "BERT"),
        "hidden_dropout_prob": cfg.dropout,
        "attention_probs_dropout_prob": cfg.attn_dropout,
        "max_position_embeddings": cfg.max_len,
        "type_vocab_size": cfg.type_vocab_size,
        "initializer_range": cfg.init_std,
        "layer_norm_eps": cfg.norm_eps,
        "tie_word_embeddings": cfg.tie_embeddings,
        "position_embedding_type": "absolute",
        "is_decoder": False,
        "add_cross_attention": False,
    }


def encoder_rules(n_layers: int, prefix: str, at: str = "core.") -> list[Rule]:
    """Our TextEncoder (under `at`) <- HF's embeddings and layers (under `prefix`)."""
    e = f"{prefix}embeddings."
    rules = [
        Rule(f"{at}embed.tokens.weight", (f"{e}word_embeddings.weight",)),
        Rule(f"{at}embed.types.weight", (f"{e}token_type_embeddings.weight",)),
        Rule(f"{at}embed.positions.weight", (f"{e}position_embeddings.weight",)),
        *weight_and_bias(f"{at}embed.norm", f"{e}LayerNorm"),
    ]
    for i in range(n_layers):
        ours, hf = f"{at}encoder.layers.{i}.", f"{prefix}encoder.layer.{i}."
        qkv = (f"{hf}attention.self.{name}" for name in ("query", "key", "value"))
        rules += weight_and_bias(f"{ours}self_attn.qkv", *qkv)
        rules += weight_and_bias(f"{ours}self_attn.out", f"{hf}attention.output.dense")
        rules += weight_and_bias(f"{ours}norm1", f"{hf}attention.output.LayerNorm")
        rules += weight_and_bias(f"{ours}ffn.up", f"{hf}intermediate.dense")
        rules += weight_and_bias(f"{ours}ffn.down", f"{hf}output.dense")
        rules += weight_and_bias(f"{ours}norm2", f"{hf}output.LayerNorm")
    return rules


def legacy_names(weights: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename TF-era LayerNorm `gamma`/`beta` to `weight`/`bias`, as transformers does on load."""
    renamed = {}
    for key, tensor in weights.items():
        if "LayerNorm." in key:
            key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        renamed[key] = tensor
    return renamed


class BertBase(HFModel):
    """A TextEncoder behind BERT's inputs; subclasses add their head and its tensor names."""

    base_prefix = "bert."  # where head models keep the encoder in a checkpoint
    encoder_at = "core."  # where this model keeps its TextEncoder in its own state dict

    def text_encoder(self) -> TextEncoder:
        """The TextEncoder this model runs (the core, or the core's backbone)."""
        return self.core

    def features(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """(B, T) ids, real-token mask and segment ids -> (B, T, D) final hidden states."""
        return self.text_encoder()(input_ids, attention_mask, token_type_ids).last_hidden_state

    def rules(self, prefix: str) -> list[Rule]:
        """Every tensor of this model and its HF name(s), the encoder under `prefix`."""
        return encoder_rules(self.core.cfg.n_layers, prefix, self.encoder_at) + self.head_rules(prefix)

    def head_rules(self, prefix: str) -> list[Rule]:
        """Rules for the tensors beside the encoder."""
        return []

    def export_config(self) -> dict:
        """config.json for this model."""
        return config_to_hf(self.core.cfg, self.hf_config)

    def export_weights(self) -> dict[str, Tensor]:
        """HF-named tensors for this model."""
        return export_state(self, self.export_rules())

    def export_rules(self) -> list[Rule]:
        """Every tensor's rule, the backbone under `base_prefix`."""
        return self.rules(self.base_prefix)

    @classmethod
    def from_checkpoint(cls, cfg: TransformerConfig, hf: dict, weights: dict[str, Tensor], prefix: str) -> BertBase:
        """An empty model of the checkpoint's shape (its encoder under `prefix`)."""
        return cls(TextEncoder(cfg), hf)


class HFBertModel(BertBase):
    """BertModel: final hidden states and pooler_output = tanh(dense(h[:, 0]))."""

    architecture = "BertModel"
    base_prefix = ""

    def __init__(
        self, core: TextEncoder, hf_config: dict, tokenizer_dir: Path | None = None, pooler: bool = True
    ) -> None:
        super().__init__(core, hf_config, tokenizer_dir)
        self.pooler = tanh_pooler(core.cfg.d_model) if pooler else None

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> ModelOutput:
        """(B, T) inputs -> last_hidden_state (B, T, D) and pooler_output (B, D) (None without a pooler)."""
        h = self.features(input_ids, attention_mask, token_type_ids)
        pooled = self.pooler(h[:, 0]) if self.pooler is not None else None
        return ModelOutput(last_hidden_state=h, pooler_output=pooled)

    def head_rules(self, prefix: str) -> list[Rule]:
        """The pooler, when the checkpoint has one (BertModel(add_pooling_layer=False) has none)."""
        return pooler_rules("pooler", prefix) if self.pooler is not None else []

    @classmethod
    def from_checkpoint(cls, cfg: TransformerConfig, hf: dict, weights: dict[str, Tensor], prefix: str) -> BertBase:
        """An empty model, with a pooler only when the checkpoint has its weights."""
        return cls(TextEncoder(cfg), hf, pooler=has_pooler(weights, prefix))


class HFBertForMaskedLM(BertBase):
    """BertForMaskedLM around the core's MaskedLM: dense + act + LayerNorm, then the (tied) projection with bias.

    The core is the whole MaskedLM (backbone and head), as a masked-LM checkpoint stores it; an NSP head
    it may carry has no place in BertForMaskedLM and is left out of exports.
    """

    architecture = "BertForMaskedLM"
    encoder_at = "core.backbone."
    core: MaskedLM

    def __init__(self, core: MaskedLM, hf_config: dict, tokenizer_dir: Path | None = None) -> None:
        super().__init__(core, hf_config, tokenizer_dir)
        if core.nsp is not None:
            log.warning("BertForMaskedLM has no next-sentence head: the NSP head is left out")

    def text_encoder(self) -> TextEncoder:
        """The MaskedLM's backbone."""
        return self.core.backbone

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> ModelOutput:
        """(B, T) inputs -> (B, T, V) logits."""
        return ModelOutput(logits=self.core(input_ids, attention_mask, token_type_ids))

    def head_rules(self, prefix: str) -> list[Rule]:
        """The transform, the output bias and (untied) the output matrix."""
        rules = weight_and_bias("core.head.dense", f"{HEAD_PREFIX}transform.dense")
        rules += weight_and_bias("core.head.norm", f"{HEAD_PREFIX}transform.LayerNorm")
        rules.append(Rule("core.head.proj.bias", (f"{HEAD_PREFIX}bias",)))
        if not self.core.cfg.tie_embeddings:
            rules.append(Rule("core.head.proj.weight", (f"{HEAD_PREFIX}decoder.weight",)))
        return rules

    def export_weights(self) -> dict[str, Tensor]:
        """Untied, transformers reads the bias from `decoder.bias`; write both names, as it does."""
        weights = super().export_weights()
        if not self.core.cfg.tie_embeddings:
            weights[f"{HEAD_PREFIX}decoder.bias"] = weights[f"{HEAD_PREFIX}bias"].clone()
        return weights

    @classmethod
    def from_checkpoint(cls, cfg: TransformerConfig, hf: dict, weights: dict[str, Tensor], prefix: str) -> BertBase:
        """An empty MaskedLM of the checkpoint's shape."""
        return cls(MaskedLM(TextEncoder(cfg)), hf)


class HFBertForSequenceClassification(BertBase):
    """BertForSequenceClassification: the tanh pooler over [CLS], dropout, a linear classifier."""

    architecture = "BertForSequenceClassification"

    def __init__(self, core: TextEncoder, hf_config: dict, tokenizer_dir: Path | None = None) -> None:
        super().__init__(core, hf_config, tokenizer_dir)
        dropout = classifier_dropout(hf_config, core.cfg)
        self.head = ClassificationHead(
            core.cfg.d_model, num_labels(hf_config), pooling="cls", pooler=True, dropout=dropout
        )

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> ModelOutput:
        """(B, T) inputs -> (B, num_labels) logits."""
        h = self.features(input_ids, attention_mask, token_type_ids)
        return ModelOutput(logits=self.head(h, attention_mask))

    @classmethod
    def from_network(
        cls, net: nn.Module, hf_config: dict, tokenizer_dir: Path | None = None
    ) -> HFBertForSequenceClassification:
        """A SequenceClassifier on a TextEncoder with BERT's head ([CLS], tanh pooler), its head shared."""
        head = getattr(net, "head", None)
        if not isinstance(getattr(net, "backbone", None), TextEncoder) or not isinstance(head, ClassificationHead):
            raise InteropError("only a classifier on an encoder backbone exports as BertForSequenceClassification")
        if head.pooling != "cls" or isinstance(head.pooler, nn.Identity):
            raise InteropError(
                f"this classifier has pooling={head.pooling!r}, pooler={not isinstance(head.pooler, nn.Identity)}, "
                "but BertForSequenceClassification, the only BERT classifier transformers loads, reads [CLS] through "
                "the tanh pooler: exporting it would give another model; train with --model.pooling cls "
                "--model.pooler true to export it"
            )
        model = cls(net.backbone, {**hf_config, "num_labels": head.classifier.out_features}, tokenizer_dir)
        model.head = head
        return model

    def head_rules(self, prefix: str) -> list[Rule]:
        """The pooler (inside HF's encoder) and the classifier."""
        return pooler_rules("head.pooler", prefix) + weight_and_bias("head.classifier", "classifier")

    def export_config(self) -> dict:
        """config.json with the label vocabulary."""
        return {**super().export_config(), **labels(self.hf_config, self.head.classifier.out_features)}


class HFBertForTokenClassification(BertBase):
    """BertForTokenClassification: dropout and a linear classifier on every token."""

    architecture = "BertForTokenClassification"

    def __init__(self, core: TextEncoder, hf_config: dict, tokenizer_dir: Path | None = None) -> None:
        super().__init__(core, hf_config, tokenizer_dir)
        dropout = classifier_dropout(hf_config, core.cfg)
        self.head = TokenClassificationHead(core.cfg.d_model, num_labels(hf_config), dropout)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> ModelOutput:
        """(B, T) inputs -> (B, T, num_labels) logits."""
        return ModelOutput(logits=self.head(self.features(input_ids, attention_mask, token_type_ids)))

    @classmethod
    def from_network(
        cls, net: nn.Module, hf_config: dict, tokenizer_dir: Path | None = None
    ) -> HFBertForTokenClassification:
        """A TokenClassifier on a TextEncoder, its head shared (the same dropout and per-token linear)."""
        head = getattr(net, "head", None)
        if not isinstance(getattr(net, "backbone", None), TextEncoder) or not isinstance(head, TokenClassificationHead):
            raise InteropError("only a token classifier on an encoder backbone exports as BertForTokenClassification")
        model = cls(net.backbone, {**hf_config, "num_labels": head.classifier.out_features}, tokenizer_dir)
        model.head = head
        return model

    def head_rules(self, prefix: str) -> list[Rule]:
        """The classifier."""
        return weight_and_bias("head.classifier", "classifier")

    def export_config(self) -> dict:
        """config.json with the label vocabulary."""
        return {**super().export_config(), **labels(self.hf_config, self.head.classifier.out_features)}


def load(cls: type[BertBase], hf: dict, weights: dict[str, Tensor], source: str) -> BertBase:
    """Build `cls` from a BERT config.json and state dict (any prefix, legacy names tolerated)."""
    weights = legacy_names(weights)
    prefix = base_prefix(weights, "bert.")
    decoder_bias = f"{HEAD_PREFIX}decoder.bias"
    if decoder_bias in weights:  # the bias the decoder really adds: tied, both are one tensor
        weights[f"{HEAD_PREFIX}bias"] = weights.pop(decoder_bias)
    tie = resolve_tie(
        weights,
        f"{HEAD_PREFIX}decoder.weight",
        f"{prefix}embeddings.word_embeddings.weight",
        bool(hf.get("tie_word_embeddings", True)),
    )
    model = cls.from_checkpoint(config_from_hf(hf, source, tie), hf, weights, prefix)
    import_model(model, model.rules(prefix), weights, source)
    return model


SPEC = FamilySpec(
    name="BERT",
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    heads=(HFBertModel, HFBertForMaskedLM, HFBertForSequenceClassification, HFBertForTokenClassification),
    load=load,
    exports={
        TextEncoder: "BertModel",
        MaskedLM: "BertForMaskedLM",
        (SequenceClassifier, TextEncoder): "BertForSequenceClassification",
        TokenClassifier: "BertForTokenClassification",
    },
)
