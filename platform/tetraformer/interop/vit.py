"""ViT <-> ImageEncoder: HFViTModel (optional tanh pooler on [CLS]) and HFViTForImageClassification.

ViT = conv patch embedding, a [CLS] token, learned positions over [CLS] + patches, LayerNorm pre-norm
blocks (layernorm_before / layernorm_after) and a final LayerNorm; the classifier reads the final [CLS].
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from tetraformer.core import ImageEncoder, SequenceClassifier, TransformerConfig
from tetraformer.interop.errors import InteropError
from tetraformer.interop.mapping import (
    Rule,
    activation_from_hf,
    activation_to_hf,
    base_prefix,
    check_supported,
    export_state,
    import_state,
    kept_config,
    report_unused,
    require,
    weight_and_bias,
)
from tetraformer.interop.outputs import ModelOutput
from tetraformer.interop.registry import Converter, HFModel, register
from tetraformer.interop.weights import WeightReader

POSITIONS = "embeddings.position_embeddings"  # HF stores it as (1, 1 + N, D), ours is (1 + N, D)
# what a core config must hold to be written as ViT
VIT_SHAPE = dict(
    norm="layernorm", norm_position="pre", position="learned", bias=True, scale_attention=True,
    scale_embeddings=False, embedding_norm=False,
)  # fmt: skip


def check_image_size(cfg: TransformerConfig, pixel_values: Tensor, interpolate: bool) -> None:
    """Refuse another image size unless asked to interpolate positions, as transformers does."""
    h, w = pixel_values.shape[-2:]
    if not interpolate and (h, w) != (cfg.image_size, cfg.image_size):
        raise ValueError(
            f"Input image size ({h}*{w}) doesn't match model ({cfg.image_size}*{cfg.image_size}); "
            "pass interpolate_pos_encoding=True to resize the position embeddings"
        )


class HFViTModel(HFModel):
    """ViT backbone: `last_hidden_state` after the final norm, `pooler_output` = tanh(dense([CLS]))."""

    architecture = "ViTModel"
    core: ImageEncoder

    def __init__(
        self,
        core: ImageEncoder,
        hf_config: dict,
        tokenizer_dir: Path | None = None,
        add_pooling_layer: bool = True,
    ) -> None:
        super().__init__(core, hf_config, tokenizer_dir)
        d = core.cfg.d_model
        self.pooler = nn.Sequential(nn.Linear(d, d), nn.Tanh()) if add_pooling_layer else None

    def forward(self, pixel_values: Tensor, interpolate_pos_encoding: bool = False) -> ModelOutput:
        """(B, C, H, W) -> ModelOutput(last_hidden_state=(B, 1 + N, D), pooler_output=(B, D) or None)."""
        check_image_size(self.core.cfg, pixel_values, interpolate_pos_encoding)
        h = self.core(pixel_values.to(self.core.embed.proj.weight.dtype)).last_hidden_state
        pooled = self.pooler(h[:, 0]) if self.pooler is not None else None
        return ModelOutput(last_hidden_state=h, pooler_output=pooled)


class HFViTForImageClassification(HFModel):
    """ViT with a linear classifier on the final-normed [CLS] state."""

    architecture = "ViTForImageClassification"
    core: SequenceClassifier

    def forward(self, pixel_values: Tensor, interpolate_pos_encoding: bool = False) -> ModelOutput:
        """(B, C, H, W) -> ModelOutput(logits=(B, num_labels))."""
        check_image_size(self.core.backbone.cfg, pixel_values, interpolate_pos_encoding)
        return ModelOutput(logits=self.core(pixel_values.to(self.core.head.classifier.weight.dtype)))


# --- import ----------------------------------------------------------------------------------------
def core_config(hf: dict, source: str) -> TransformerConfig:
    """The core config of a ViT config.json (absent entries take ViTConfig's defaults)."""
    return TransformerConfig(
        d_model=hf.get("hidden_size", 768), n_heads=hf.get("num_attention_heads", 12),
        n_layers=hf.get("num_hidden_layers", 12), d_ff=hf.get("intermediate_size", 3072), vocab_size=0,
        d_head=hf.get("head_dim"),
        norm="layernorm", norm_position="pre", norm_eps=hf.get("layer_norm_eps", 1e-12),
        activation=activation_from_hf(hf.get("hidden_act", "gelu"), "hidden_act", source),
        position="learned", bias=True, qkv_bias=hf.get("qkv_bias", True),
        image_size=_square(hf.get("image_size", 224), "image_size", source),
        patch_size=_square(hf.get("patch_size", 16), "patch_size", source), n_channels=hf.get("num_channels", 3),
        dropout=hf.get("hidden_dropout_prob", 0.0), attn_dropout=hf.get("attention_probs_dropout_prob", 0.0),
        init_std=hf.get("initializer_range", 0.02), tie_embeddings=False,
    )  # fmt: skip


def _square(value: Any, field: str, source: str) -> int:
    """An int side length; [n, n] lists are accepted, rectangles are not supported by the core."""
    if isinstance(value, list | tuple):
        if len(value) != 2 or value[0] != value[1]:
            raise InteropError(f"{source}: {field}={value!r}; Tetraformer supports square sizes only")
        value = value[0]
    return int(value)


def load_vit_model(hf: dict, weights: dict[str, Tensor], source: str) -> HFViTModel:
    """A ViTModel checkpoint (or a head model's `vit.` backbone); the pooler only when the file has one."""
    prefix = base_prefix(weights, "vit.")
    pooled = f"{prefix}pooler.dense.weight" in weights
    if pooled:
        check_supported(
            hf, source, {"pooler_act": ("tanh",), "pooler_output_size": (hf.get("hidden_size", 768), None)}
        )
    cfg = core_config(hf, source)
    model = HFViTModel(ImageEncoder(cfg), hf, add_pooling_layer=pooled)
    extra = weight_and_bias("pooler.0", f"{prefix}pooler.dense") if pooled else []
    _import(model, backbone_rules(cfg, "core.", prefix) + extra, weights, source, prefix)
    return model


def load_vit_classifier(hf: dict, weights: dict[str, Tensor], source: str) -> HFViTForImageClassification:
    """A ViTForImageClassification checkpoint: backbone under `vit.`, `classifier` on top."""
    labels = hf.get("id2label")
    n_labels = len(labels) if labels else hf.get("num_labels", 2)
    cfg = core_config(hf, source)
    model = HFViTForImageClassification(SequenceClassifier(ImageEncoder(cfg), n_labels, pooling="cls"), hf)
    head = weight_and_bias("core.head.classifier", "classifier")
    _import(model, backbone_rules(cfg, "core.backbone.", "vit.") + head, weights, source, "vit.")
    return model


def _import(model: HFModel, rules: list[Rule], weights: dict[str, Tensor], source: str, theirs: str) -> None:
    """Fill the model by its rules, reading HF's (1, 1 + N, D) position table (under `theirs`) as ours."""
    weights = dict(weights)
    key = theirs + POSITIONS
    if key in weights and weights[key].ndim == 3 and weights[key].shape[0] == 1:
        weights[key] = weights[key][0]  # (1, 1 + N, D) -> (1 + N, D)
    reader = WeightReader(weights, source)
    import_state(model, rules, reader)
    report_unused(reader, model.architecture)


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
def save_vit_model(model: HFViTModel) -> tuple[dict, dict[str, Tensor]]:
    """(config.json, tensors) for transformers' ViTModel (which adds a fresh pooler when we have none)."""
    extra = weight_and_bias("pooler.0", "pooler.dense") if model.pooler is not None else []
    weights = _export(model, model.core.cfg, "core.", "", extra)
    d = model.core.cfg.d_model
    config = hf_config(model.core.cfg, model.hf_config) | dict(pooler_act="tanh", pooler_output_size=d)
    return config, weights


def save_vit_classifier(model: HFViTForImageClassification) -> tuple[dict, dict[str, Tensor]]:
    """(config.json, tensors) for transformers' ViTForImageClassification, labels included."""
    cfg = model.core.backbone.cfg
    head = weight_and_bias("core.head.classifier", "classifier")
    weights = _export(model, cfg, "core.backbone.", "vit.", head)
    n_labels = model.core.head.classifier.out_features
    return hf_config(cfg, model.hf_config) | labels(n_labels, model.hf_config), weights


def _export(
    model: HFModel, cfg: TransformerConfig, ours: str, theirs: str, extra: list[Rule]
) -> dict[str, Tensor]:
    """HF tensors of the backbone and head, position embeddings back in HF's (1, 1 + N, D) layout."""
    require(cfg, "ViT", VIT_SHAPE)
    weights = export_state(model, backbone_rules(cfg, ours, theirs) + extra)
    weights[theirs + POSITIONS] = weights[theirs + POSITIONS][None]
    return weights


def hf_config(cfg: TransformerConfig, original: dict) -> dict[str, Any]:
    """The ViT config.json entries that follow from the core config (others kept from the original)."""
    kept = {k: v for k, v in kept_config(original).items() if k != "head_dim"}
    return kept | dict(
        model_type="vit", hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads, intermediate_size=cfg.d_ff,
        hidden_act=activation_to_hf(cfg.activation, original.get("hidden_act"), "ViT"),
        hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.attn_dropout,
        initializer_range=cfg.init_std, layer_norm_eps=cfg.norm_eps, image_size=cfg.image_size,
        patch_size=cfg.patch_size, num_channels=cfg.n_channels, qkv_bias=cfg.use_qkv_bias,
    ) | ({"head_dim": cfg.d_head} if cfg.d_head else {})  # fmt: skip


def labels(n_labels: int, original: dict) -> dict[str, Any]:
    """id2label / label2id: the original names when their count still fits, else LABEL_i."""
    id2label = original.get("id2label") or {}
    if len(id2label) != n_labels:
        id2label = {str(i): f"LABEL_{i}" for i in range(n_labels)}
    id2label = {str(k): v for k, v in id2label.items()}
    return dict(id2label=id2label, label2id={v: int(k) for k, v in id2label.items()})


register(
    Converter("ViTModel", load_vit_model, save_vit_model),
    Converter("ViTForImageClassification", load_vit_classifier, save_vit_classifier),
)
