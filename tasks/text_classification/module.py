"""LightningModule for text classification: cross-entropy (or BCE for multi-label), accuracy/F1, predictions."""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.classification import (
    MulticlassAccuracy,
    MulticlassF1Score,
    MultilabelExactMatch,
    MultilabelF1Score,
)

from tasks.text_classification.model import ClassifierPooling, build_classifier, check_pooling
from tetraformer.core import TextEncoder, TransformerConfig
from tetraformer.core.backbones import BackboneKind
from tetraformer.core.ensemble import build_ensemble, member_outputs
from tetraformer.data.spec import DataSpec
from tetraformer.errors import at_least, require
from tetraformer.training.base.ensemble import check_ensemble, pooled_log_probs
from tetraformer.training.base.labelled import LabelledTask
from tetraformer.training.base.losses import balanced_class_weights, given_class_weights
from tetraformer.training.base.module import TaskModule
from tetraformer.training.base.predictions import PREDICTED, PROBABILITIES, top_k_labels


class TextClassification(LabelledTask, TaskModule):
    """A classification head on an encoder, decoder or encoder-decoder backbone, trained on labelled text.

    Single-label rows learn with (class-weighted) cross-entropy; multi-label rows with BCE, a label predicted
    when its probability reaches `threshold`. With `ensemble` K > 1, K classifiers of one shape train side by side
    from their own initial weights, each on its own loss over the same batches (the loss logged is their mean);
    a text's class comes from the mean of their log-probabilities (multi-label: of their label probabilities), at
    K times the cost of a step. The label vocabulary travels in the checkpoint. The TaskModule
    options (arch, optim, init_from, label_smoothing) pass through `**kwargs`.
    """

    hf_architectures = ("BertForSequenceClassification",)

    def __init__(
        self,
        backbone: BackboneKind = "encoder",
        pooling: ClassifierPooling | None = None,
        pooler: bool = True,
        class_weights: list[float] | Literal["balanced"] | None = None,
        threshold: float = 0.5,
        top_k: int = 3,
        ensemble: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_pooling(self, backbone, pooling)
        require(self, "threshold", threshold, 0 < threshold < 1, "must be more than 0 and less than 1")
        at_least(self, 1, top_k=top_k)
        weights_ok = class_weights in (None, "balanced") or all(w > 0 for w in class_weights)
        require(self, "class_weights", class_weights, weights_ok, "must be balanced or weights more than 0")
        self.save_hyperparameters()
        self.backbone_kind, self.pooling, self.pooler = backbone, pooling, pooler
        self.class_weights, self.threshold, self.top_k = class_weights, threshold, top_k
        self.ensemble = check_ensemble(ensemble, self, "classifiers")
        self.loss_weights: Tensor | None = None

    # --- network -------------------------------------------------------------------------------------
    def network_config(self, spec: DataSpec) -> TransformerConfig:
        """The architecture with the tokenizer's vocabulary, room for max_length, segments on an encoder."""
        max_len = max(self.arch.max_len, spec.max_length)
        types = self.arch.type_vocab_size or (2 if self.backbone_kind == "encoder" else 0)
        return self.arch.replace(vocab_size=spec.vocab_size, max_len=max_len, type_vocab_size=types)

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A SequenceClassifier with one output per label; an Ensemble of `ensemble` of them when it is above 1."""
        labels = len(self.vocabulary)
        return build_ensemble(
            lambda: build_classifier(cfg, self.backbone_kind, labels, self.pooling, self.pooler), self.ensemble
        )

    @property
    def multi_label(self) -> bool:
        """Whether rows carry a set of labels."""
        return self.vocabulary.multi_label

    # --- the data's labels ---------------------------------------------------------------------------
    def on_fit_start(self) -> None:
        """Build metrics, then set the loss weights."""
        super().on_fit_start()
        self.loss_weights = self._loss_weights()

    def _loss_weights(self) -> Tensor | None:
        """Per-class loss weights: the given list, or 'balanced' from the training labels' counts."""
        if self.class_weights is None:
            return None
        if self.class_weights == "balanced":
            return balanced_class_weights(self.spec.extras["label_counts"], self.spec.extras["rows"])
        return given_class_weights(self.class_weights, len(self.vocabulary))

    # --- steps ---------------------------------------------------------------------------------------
    def forward_batch(self, batch: dict[str, Tensor]) -> Tensor:
        """(B, T) ids, mask (and segments on an encoder) -> (K, B, C) logits of the K classifiers."""
        extra = {"token_type_ids": batch["token_type_ids"]} if isinstance(self.net.backbone, TextEncoder) else {}
        return member_outputs(self.net, batch["input_ids"], attention_mask=batch["attention_mask"], **extra)

    def pooled_scores(self, logits: Tensor) -> Tensor:
        """(K, B, C) logits -> (B, C): label probabilities (multi-label), else scores whose softmax is the
        classifiers' pooled class probabilities."""
        return logits.sigmoid().mean(0) if self.multi_label else pooled_log_probs(logits)

    def member_loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """One classifier's loss: (B, C) logits against (B,) class ids or (B, C) multi-hot targets."""
        if self.multi_label:
            weights = None if self.loss_weights is None else self.loss_weights.to(logits.device)
            return nn.functional.binary_cross_entropy_with_logits(logits, targets.float(), weight=weights)
        return self.cross_entropy(logits, targets, weight=self.loss_weights)

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """The mean over the classifiers of their loss; pooled scores (single-label) or probabilities
        (multi-label) feed the metrics."""
        logits = self.forward_batch(batch).float()  # (K, B, C)
        targets = batch["labels"]  # (B,) class ids or (B, C) multi-hot
        loss = torch.stack([self.member_loss(member, targets) for member in logits]).mean()
        return {"loss": loss, "preds": self.pooled_scores(logits.detach()), "targets": targets}

    def make_metrics(self) -> dict[str, Metric]:
        """Accuracy and macro-F1; multi-label: micro/macro F1 and exact-match accuracy at the threshold."""
        n = len(self.vocabulary)
        if self.multi_label:
            return {
                "f1_micro": MultilabelF1Score(n, threshold=self.threshold, average="micro"),
                "f1_macro": MultilabelF1Score(n, threshold=self.threshold, average="macro"),
                "exact_match": MultilabelExactMatch(n, threshold=self.threshold),
            }
        return {"acc": MulticlassAccuracy(n, average="micro"), "f1_macro": MulticlassF1Score(n, average="macro")}

    def label_names(self) -> list[str] | None:
        """Class names for the per-class report and confusion matrix (single-label only)."""
        return None if self.vocabulary is None or self.multi_label else list(self.vocabulary.names)

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Real tokens in the batch."""
        return int(batch["attention_mask"].sum())

    # --- prediction ----------------------------------------------------------------------------------
    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, Any]]:
        """Each input record with its predicted label(s) and the top-k labels' probabilities."""
        pooled = self.pooled_scores(self.forward_batch(batch).float())  # (B, C)
        probs = pooled if self.multi_label else pooled.softmax(-1)  # (B, C)
        top = top_k_labels(probs, self.vocabulary.names, self.top_k)
        out = []
        for record, p, scores in zip(batch["record"], probs, top, strict=True):
            if self.multi_label:
                predicted: Any = self.vocabulary.decode((p >= self.threshold).long())
            else:
                predicted = self.vocabulary.decode(int(p.argmax()))
            out.append({**record, PREDICTED: predicted, PROBABILITIES: scores})
        return out
