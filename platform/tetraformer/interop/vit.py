"""ViT checkpoints in and out: ViTModel (optional tanh pooler on [CLS]) and ViTForImageClassification.

ViT = conv patch embedding, a [CLS] token, learned positions over [CLS] + patches, LayerNorm pre-norm
blocks (layernorm_before / layernorm_after) and a final LayerNorm; the classifier reads the final [CLS].
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from tetraformer.core import ClassificationHead, ImageEncoder, SequenceClassifier, TransformerConfig
from tetraformer.interop.errors import InteropError
from tetraformer.interop.heads import has_pooler, labels, num_labels, pooler_rules, tanh_pooler
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
    weight_and_bias,
)
from tetraformer.interop.outputs import ModelOutput
from tetraformer.interop.registry import FamilySpec, HFModel

POSITIONS = "embeddings.position_embeddings"  # HF stores it as (1, 1 + N, D), ours is (1 + N, D)
# what a core config must hold to be written as ViT
VIT_SHAPE = dict(
    norm="layernorm",
    norm_position="pre",
    position="learned",
    bias=True,
    scale_attention=True,
    scale_embeddings=False,
    embedding_norm=False,
)


def check_image_size(cfg: TransformerConfig, pixel_values: Tensor, interpolate: bool) -> None:
    """Refuse another image size unless asked to interpolate positions, as transformers does."""
    h, w = pixel_values.shape[-2:]
    if not interpolate and (h, w) != (cfg.image_size, cfg.image_size):
        raise ValueError(
            f"Input image size ({h}*{w}) doesn't match model ({cfg.image_size}*{cfg.image_size}); "
            "pass interpolate_pos_encoding=True to resize the position embeddings"
        )


class ViTBase(HFModel):
    """A ViT backbone behind HF's `pixel_values`; subclasses choose the core, its key and the head."""

    base_prefix = "vit."  # where head models keep the backbone in a checkpoint
    backbone_key = "core.backbone."  # where this class keeps the ImageEncoder in its state dict

    def backbone(self) -> ImageEncoder:
        """The ImageEncoder inside the core."""
        return self.core.backbone

    def rules(self, prefix: str) -> list[Rule]:
        """Every tensor of this model and its HF name(s), the backbone under `prefix`."""
        return backbone_rules(self.backbone().cfg, self.backbone_key, prefix) + self.head_rules(prefix)

    def head_rules(self, prefix: str) -> list[Rule]:
        """Rules for the tensors beside the backbone."""
        return []

    def export_rules(self) -> list[Rule]:
        """Every tensor's rule, the backbone under `base_prefix`."""
        return self.rules(self.base_prefix)

    def export_config(self) -> dict:
        """config.json for this model."""
        return config_to_hf(self.backbone().cfg, self.hf_config)

    def export_weights(self) -> dict[str, Tensor]:
        """HF tensors of the backbone and head, position embeddings back in HF's (1, 1 + N, D) layout."""
        require(self.backbone().cfg, "ViT", VIT_SHAPE)
        weights = export_state(self, self.export_rules())
        key = self.base_prefix + POSITIONS
        weights[key] = weights[key][None]
        return weights


class HFViTModel(ViTBase):
    """ViT backbone: `last_hidden_state` after the final norm, `pooler_output` = tanh(dense([CLS]))."""

    architecture = "ViTModel"
    base_prefix, backbone_key = "", "core."
    core: ImageEncoder

    def __init__(
        self, core: ImageEncoder, hf_config: dict, tokenizer_dir: Path | None = None, pooler: bool = True
    ) -> None:
        super().__init__(core, hf_config, tokenizer_dir)
        self.pooler = tanh_pooler(core.cfg.d_model) if pooler else None

    def backbone(self) -> ImageEncoder:
        """The core itself."""
        return self.core

    def forward(self, pixel_values: Tensor, interpolate_pos_encoding: bool = False) -> ModelOutput:
        """(B, C, H, W) -> ModelOutput(last_hidden_state=(B, 1 + N, D), pooler_output=(B, D) or None)."""
        check_image_size(self.core.cfg, pixel_values, interpolate_pos_encoding)
        h = self.core(pixel_values.to(self.core.embed.proj.weight.dtype)).last_hidden_state
        pooled = self.pooler(h[:, 0]) if self.pooler is not None else None
        return ModelOutput(last_hidden_state=h, pooler_output=pooled)

    def head_rules(self, prefix: str) -> list[Rule]:
        """The pooler, when the checkpoint has one (ViTModel(add_pooling_layer=False) has none)."""
        return pooler_rules("pooler", prefix) if self.pooler is not None else []

    def export_config(self) -> dict:
        """config.json, saying the pooler is tanh over d_model (transformers adds a fresh one when we have none)."""
        return super().export_config() | dict(pooler_act="tanh", pooler_output_size=self.core.cfg.d_model)

    @classmethod
    def from_checkpoint(cls, cfg: TransformerConfig, hf: dict, weights: dict[str, Tensor], prefix: str) -> ViTBase:
        """An empty model, with a pooler only when the checkpoint has its weights."""
        return cls(ImageEncoder(cfg), hf, pooler=has_pooler(weights, prefix))


class HFViTForImageClassification(ViTBase):
    """ViT with a linear classifier on the final-normed [CLS] state."""

    architecture = "ViTForImageClassification"
    core: SequenceClassifier

    def forward(self, pixel_values: Tensor, interpolate_pos_encoding: bool = False) -> ModelOutput:
        """(B, C, H, W) -> ModelOutput(logits=(B, num_labels))."""
        check_image_size(self.core.backbone.cfg, pixel_values, interpolate_pos_encoding)
        return ModelOutput(logits=self.core(pixel_values.to(self.core.head.classifier.weight.dtype)))

    @classmethod
    def from_network(
        cls, net: nn.Module, hf_config: dict, tokenizer_dir: Path | None = None
    ) -> HFViTForImageClassification:
        """A SequenceClassifier on an ImageEncoder that reads [CLS] straight into its linear classifier."""
        head = getattr(net, "head", None)
        if not isinstance(getattr(net, "backbone", None), ImageEncoder) or not isinstance(head, ClassificationHead):
            raise InteropError("only a classifier on an image encoder exports as ViTForImageClassification")
        pooler = not isinstance(head.pooler, nn.Identity)
        if head.pooling != "cls" or pooler:
            raise InteropError(
                "ViTForImageClassification classifies the final [CLS] state directly (transformers has no "
                f"mean-pooling or pooler option for it); this classifier has pooling={head.pooling!r}, "
                f"pooler={pooler} (train with --model.pooling cls to export it)"
            )
        return cls(net, {**hf_config, "num_labels": head.classifier.out_features}, tokenizer_dir)

    def head_rules(self, prefix: str) -> list[Rule]:
        """The classifier on [CLS]."""
        return weight_and_bias("core.head.classifier", "classifier")

    def export_config(self) -> dict:
        """config.json with the label vocabulary."""
        return super().export_config() | labels(self.hf_config, self.core.head.classifier.out_features)

    @classmethod
    def from_checkpoint(cls, cfg: TransformerConfig, hf: dict, weights: dict[str, Tensor], prefix: str) -> ViTBase:
        """An empty classifier with the checkpoint's number of labels."""
        return cls(SequenceClassifier(ImageEncoder(cfg), num_labels(hf), pooling="cls"), hf)


# --- import ----------------------------------------------------------------------------------------
def config_from_hf(hf: dict, source: str) -> TransformerConfig:
    """The core config of a ViT config.json (absent entries take ViTConfig's defaults)."""
    return TransformerConfig(
        d_model=hf.get("hidden_size", 768),
        n_heads=hf.get("num_attention_heads", 12),
        n_layers=hf.get("num_hidden_layers", 12),
        d_ff=hf.get("intermediate_size", 3072),
        vocab_size=0,
        d_head=hf.get("head_dim"),
        norm="layernorm",
        norm_position="pre",
        norm_eps=hf.get("layer_norm_eps", 1e-12),
        activation=activation_from_hf(hf.get("hidden_act", "gelu"), "hidden_act", source),
        position="learned",
        bias=True,
        qkv_bias=hf.get("qkv_bias", True),
        image_size=_square(hf.get("image_size", 224), "image_size", source),
        patch_size=_square(hf.get("patch_size", 16), "patch_size", source),
        n_channels=hf.get("num_channels", 3),
        dropout=hf.get("hidden_dropout_prob", 0.0),
        attn_dropout=hf.get("attention_probs_dropout_prob", 0.0),
        init_std=hf.get("initializer_range", 0.02),
        tie_embeddings=False,
    )


def _square(value: Any, field: str, source: str) -> int:
    """An int side length; [n, n] lists are accepted, rectangles are not supported by the core."""
    if isinstance(value, list | tuple):
        if len(value) != 2 or value[0] != value[1]:
            raise InteropError(f"{source}: {field}={value!r}; Tetraformer supports square sizes only")
        value = value[0]
    return int(value)


def load(cls: type[ViTBase], hf: dict, weights: dict[str, Tensor], source: str) -> ViTBase:
    """Build `cls` from a ViT config.json and state dict, reading HF's (1, 1 + N, D) position table as ours."""
    weights = dict(weights)
    prefix = base_prefix(weights, "vit.")
    key = prefix + POSITIONS
    if key in weights and weights[key].ndim == 3 and weights[key].shape[0] == 1:
        weights[key] = weights[key][0]  # (1, 1 + N, D) -> (1 + N, D)
    if has_pooler(weights, prefix):
        pooler_size = (hf.get("hidden_size", 768), None)
        check_supported(hf, source, {"pooler_act": ("tanh",), "pooler_output_size": pooler_size})
    model = cls.from_checkpoint(config_from_hf(hf, source), hf, weights, prefix)
    import_model(model, model.rules(prefix), weights, source)
    return model


def backbone_rules(cfg: TransformerConfig, ours: str, theirs: str) -> list[Rule]:
    """Every backbone tensor (ours under `ours`) and its HF name(s) (under `theirs`)."""
    emb = f"{theirs}embeddings"
    out = [
        Rule(f"{ours}embed.cls", (f"{emb}.cls_token",)),
        Rule(f"{ours}embed.positions.weight", (theirs + POSITIONS,)),
        *weight_and_bias(f"{ours}embed.proj", f"{emb}.patch_embeddings.projection"),
        *weight_and_bias(f"{ours}encoder.final_norm", f"{theirs}layernorm"),
    ]
    for i in range(cfg.n_layers):
        out += _layer_rules(cfg, f"{ours}encoder.layers.{i}", f"{theirs}encoder.layer.{i}")
    return out


def _layer_rules(cfg: TransformerConfig, ours: str, theirs: str) -> list[Rule]:
    """One block: separate query/key/value fuse into our qkv (their biases only when qkv_bias)."""
    qkv = tuple(f"{theirs}.attention.attention.{p}" for p in ("query", "key", "value"))
    out = [Rule(f"{ours}.self_attn.qkv.weight", tuple(f"{k}.weight" for k in qkv))]
    if cfg.use_qkv_bias:
        out.append(Rule(f"{ours}.self_attn.qkv.bias", tuple(f"{k}.bias" for k in qkv)))
    return out + [
        *weight_and_bias(f"{ours}.norm1", f"{theirs}.layernorm_before"),
        *weight_and_bias(f"{ours}.self_attn.out", f"{theirs}.attention.output.dense"),
        *weight_and_bias(f"{ours}.norm2", f"{theirs}.layernorm_after"),
        *weight_and_bias(f"{ours}.ffn.up", f"{theirs}.intermediate.dense"),
        *weight_and_bias(f"{ours}.ffn.down", f"{theirs}.output.dense"),
    ]


# --- export ----------------------------------------------------------------------------------------
def config_to_hf(cfg: TransformerConfig, original: dict) -> dict[str, Any]:
    """The ViT config.json entries that follow from the core config (others kept from the original)."""
    kept = {k: v for k, v in kept_config(original).items() if k != "head_dim"}
    return (
        kept
        | dict(
            model_type="vit",
            hidden_size=cfg.d_model,
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            intermediate_size=cfg.d_ff,
            hidden_act=activation_to_hf(cfg.activation, original.get("hidden_act"), "ViT"),
            hidden_dropout_prob=cfg.dropout,
            attention_probs_dropout_prob=cfg.attn_dropout,
            initializer_range=cfg.init_std,
            layer_norm_eps=cfg.norm_eps,
            image_size=cfg.image_size,
            patch_size=cfg.patch_size,
            num_channels=cfg.n_channels,
            qkv_bias=cfg.use_qkv_bias,
        )
        | ({"head_dim": cfg.d_head} if cfg.d_head else {})
    )


SPEC = FamilySpec(
    name="ViT",
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    heads=(HFViTModel, HFViTForImageClassification),
    load=load,
    exports={ImageEncoder: "ViTModel", (SequenceClassifier, ImageEncoder): "ViTForImageClassification"},
)
