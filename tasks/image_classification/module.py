"""LightningModule for image classification: a ViT classifier, top-1/top-5 accuracy and macro-F1,
predictions."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from tasks.image_classification.model import ImagePooling, build_image_classifier
from tetraformer.core import TransformerConfig
from tetraformer.data.images import Normalization, decode_image
from tetraformer.data.spec import DataSpec
from tetraformer.errors import at_least
from tetraformer.training.base.labelled import LabelledTask
from tetraformer.training.base.module import TaskModule
from tetraformer.training.base.predictions import PREDICTED, PROBABILITIES, top_k_labels
from tetraformer.training.callbacks.attention_maps import AttentionRolloutImages

log = logging.getLogger(__name__)
TOP5_MIN_CLASSES = 6  # top-5 accuracy is reported only when it can miss: more than 5 classes
HEAD_PREFIX = "head."


class ImageClassification(LabelledTask, TaskModule):
    """A ViT (patch embedding, [CLS], pre-norm encoder) and a classification head, trained on labelled images.

    Cross-entropy on class ids, or on soft targets when the data mixes images (mixup / cutmix). The label
    vocabulary, image size, channels and normalisation travel in the checkpoint, so `predict`, `test` and
    `image_inputs` need only it. At each validation, `attention_images` fixed validation images get their
    attention-rollout maps drawn (RUN_DIR/attention, W&B; 0: none). The TaskModule options (arch, optim,
    init_from, label_smoothing) pass through `**kwargs`.
    """

    token_unit = "patch tokens ([CLS] + patches per image)"  # samples/s are images/s

    def __init__(self, pooling: ImagePooling = "cls", top_k: int = 5, attention_images: int = 4, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        at_least(self, 1, top_k=top_k)
        at_least(self, 0, attention_images=attention_images)
        self.save_hyperparameters()
        self.pooling, self.top_k, self.attention_images = pooling, top_k, attention_images
        self.normalization: Normalization | None = None

    # --- network -------------------------------------------------------------------------------------
    def use_spec(self, spec: DataSpec) -> None:
        """Take the data's spec, and its normalisation as the function the network's inputs go through."""
        super().use_spec(spec)
        self.normalization = Normalization(list(spec.image.mean), list(spec.image.std))

    def network_config(self, spec: DataSpec) -> TransformerConfig:
        """The architecture at the data's image size and channels, with no token vocabulary."""
        return self.arch.replace(image_size=spec.image.size, n_channels=spec.image.channels, vocab_size=0)

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A ViT classifier with one output per label."""
        return build_image_classifier(cfg, len(self.vocabulary), self.pooling)

    def adapt_pretrained(
        self, cfg: TransformerConfig, state: dict[str, Tensor], spec: DataSpec
    ) -> tuple[TransformerConfig, dict[str, Tensor]]:
        """The source at the data's image size and channels (loading resizes its positions and converts its
        patch projection); its head dropped, to start fresh, when it has other classes than the data."""
        cfg = cfg.replace(image_size=spec.image.size, n_channels=spec.image.channels, vocab_size=0)
        classes = len(self.vocabulary)
        head = state.get(f"{HEAD_PREFIX}classifier.weight")  # (K, D) of a source classifier
        if head is not None and head.shape[0] != classes:
            log.info(
                "%s: its head has %d classes, the data %d; the head starts fresh",
                self.init_from,
                head.shape[0],
                classes,
            )
            state = {k: v for k, v in state.items() if not k.startswith(HEAD_PREFIX)}
        return cfg, state

    # --- images ------------------------------------------------------------------------------------
    def batch_images(self, batch: dict[str, Any]) -> tuple[Tensor, Tensor]:
        """A batch's images: (display (B, C, S, S) uint8, pixel_values (B, C, S, S) float), for attention maps."""
        return batch["pixels"], self.normalization(batch["pixels"])

    def image_inputs(self, path: str | Path) -> tuple[Tensor, Tensor]:
        """One image file as this model reads it: (display (C, S, S) uint8, pixel_values (1, C, S, S)
        float)."""
        cfg = self.net.cfg
        display = decode_image(path, cfg.n_channels, cfg.image_size)  # (C, S, S)
        return display, self.normalization(display[None]).to(self.device)

    def configure_callbacks(self) -> list[Callback]:
        """Attention-rollout pictures of `attention_images` validation images at each validation (0: none)."""
        return [AttentionRolloutImages(self.attention_images)] if self.attention_images > 0 else []

    # --- steps ---------------------------------------------------------------------------------------
    def forward_batch(self, batch: dict[str, Any]) -> Tensor:
        """(B, C, S, S) pixels in 0..255 -> normalised -> (B, K) logits."""
        return self.net(self.normalization(batch["pixels"]))

    def compute(self, batch: dict[str, Any], stage: str) -> dict[str, Tensor]:
        """Cross-entropy on class ids or mixed (B, K) targets; metrics see the logits and the dominant
        class."""
        logits = self.forward_batch(batch).float()  # (B, K)
        targets = batch["labels"]  # (B,) class ids, or (B, K) probabilities when mixed
        loss = self.cross_entropy(logits, targets)
        hard = targets if targets.ndim == 1 else targets.argmax(-1)
        return {"loss": loss, "preds": logits.detach(), "targets": hard}

    def make_metrics(self) -> dict[str, Metric]:
        """Top-1 accuracy, macro-F1, and top-5 accuracy when there are more than 5 classes."""
        n = len(self.vocabulary)
        metrics: dict[str, Metric] = {
            "acc": MulticlassAccuracy(n, average="micro"),
            "f1_macro": MulticlassF1Score(n, average="macro"),
        }
        if n >= TOP5_MIN_CLASSES:
            metrics["top5_acc"] = MulticlassAccuracy(n, top_k=5, average="micro")
        return metrics

    def label_names(self) -> list[str] | None:
        """Class names for the per-class report and confusion matrix."""
        return None if self.vocabulary is None else list(self.vocabulary.names)

    def batch_tokens(self, batch: dict[str, Any]) -> int:
        """Positions the encoder sees: [CLS] + patches per image."""
        pixels = batch["pixels"]  # (B, C, H, W)
        patch = self.net.cfg.patch_size
        return pixels.shape[0] * (1 + (pixels.shape[-2] // patch) * (pixels.shape[-1] // patch))

    def row_tokens(self) -> int | None:
        """Every image is read at the spec's size: [CLS] + its patches."""
        if self.spec is None or self.spec.image is None or self.net is None:
            return None
        return 1 + (self.spec.image.size // self.net.cfg.patch_size) ** 2

    # --- prediction ----------------------------------------------------------------------------------
    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, Any]]:
        """Each image's path, predicted label and the top-k labels' probabilities."""
        probs = self.forward_batch(batch).float().softmax(-1)  # (B, K)
        top = top_k_labels(probs, self.vocabulary.names, self.top_k)  # best first: the first is the prediction
        return [
            {"path": path, PREDICTED: next(iter(scores)), PROBABILITIES: scores}
            for path, scores in zip(batch["paths"], top, strict=True)
        ]
