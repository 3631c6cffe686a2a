"""What head classes of several families share: the label vocabulary, classifier dropout, the tanh pooler."""

from __future__ import annotations

from torch import nn

from tetraformer.core.config import TransformerConfig
from tetraformer.interop.mapping import Rule, weight_and_bias


def num_labels(hf: dict) -> int:
    """Classes of a classifier config: len(id2label), else num_labels, else transformers' default 2."""
    return len(hf["id2label"]) if hf.get("id2label") else int(hf.get("num_labels", 2))


def labels(hf: dict, n: int) -> dict:
    """id2label / label2id for n classes: the checkpoint's names when they fit, else LABEL_i."""
    id2label = {str(k): v for k, v in (hf.get("id2label") or {}).items()}
    if len(id2label) != n:
        id2label = {str(i): f"LABEL_{i}" for i in range(n)}
    return {"id2label": id2label, "label2id": {v: int(k) for k, v in id2label.items()}}


def classifier_dropout(hf: dict, cfg: TransformerConfig) -> float:
    """classifier_dropout when set, else the hidden dropout, as transformers does."""
    return cfg.dropout if hf.get("classifier_dropout") is None else hf["classifier_dropout"]


def tanh_pooler(d_model: int) -> nn.Sequential:
    """BERT's and ViT's pooler: tanh(dense(h[:, 0])), applied by the caller to the first token's state."""
    return nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh())


def pooler_rules(ours: str, prefix: str) -> list[Rule]:
    """Our pooler's Linear (`ours` is the Sequential's key) <- HF's `{prefix}pooler.dense`."""
    return weight_and_bias(f"{ours}.0", f"{prefix}pooler.dense")


def has_pooler(weights: dict, prefix: str) -> bool:
    """Whether a checkpoint holds pooler weights (BertModel/ViTModel(add_pooling_layer=False) have none)."""
    return f"{prefix}pooler.dense.weight" in weights
