"""A tiny classifying TaskModule and uneven batches of a fixed labelled fixture, for metric tests."""

from __future__ import annotations

from typing import Any

import lightning as L
import pytest
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from tests.training.forked_ranks import own_port
from tetraformer.core.config import TransformerConfig
from tetraformer.data import LabelVocabulary
from tetraformer.training.base.module import TaskModule

LABELS = ["cat", "dog", "emu"]
BATCH_SIZES = [7, 1, 13, 2, 9, 4]  # uneven: a mean of per-batch F1 is not the F1 of the whole split


class LinearNet(nn.Module):
    """A seeded linear layer over 4 features, carrying the config the optimizer reads."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        torch.manual_seed(3)
        self.linear = nn.Linear(4, len(LABELS))

    def forward(self, x: Tensor) -> Tensor:
        """(B, 4) -> (B, C) logits."""
        return self.linear(x)


class TinyClassifier(TaskModule):
    """A linear classifier over 4 features that returns class ids and targets from `compute`."""

    needs_spec = False  # built from `arch` alone: its batches come from plain loaders

    def __init__(self, labels: list[str] | None = None) -> None:
        super().__init__()
        self.labels = LabelVocabulary(labels or LABELS)

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A seeded linear layer: its predictions are fixed, right or wrong."""
        return LinearNet(cfg)

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Cross-entropy, predicted ids and targets."""
        logits = self.net(batch["x"])  # (B, C)
        return {
            "loss": self.cross_entropy(logits, batch["y"]),
            "preds": logits.argmax(-1),
            "targets": batch["y"],
        }

    def make_metrics(self) -> dict[str, Metric]:
        """Macro-F1 and accuracy over the classes."""
        return {
            "f1": MulticlassF1Score(len(LABELS), average="macro"),
            "acc": MulticlassAccuracy(len(LABELS), average="micro"),
        }

    def label_names(self) -> list[str] | None:
        """The class names of the label vocabulary."""
        return self.labels.names

    def task_state(self) -> dict[str, Any]:
        """The label vocabulary travels in the checkpoint."""
        return {"labels": self.labels.state()}

    def load_task_state(self, state: dict[str, Any]) -> None:
        """Restore the label vocabulary."""
        self.labels = LabelVocabulary.from_state(state["labels"])


def fixture() -> tuple[Tensor, Tensor]:
    """(N, 4) features and (N,) labels with every class present."""
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(sum(BATCH_SIZES), 4, generator=generator)
    y = torch.randint(0, len(LABELS), (sum(BATCH_SIZES),), generator=generator)
    return x, y


def uneven_loader(x: Tensor, y: Tensor, sizes: list[int] = BATCH_SIZES) -> DataLoader:
    """Batches of `sizes` rows, in order."""
    starts = torch.tensor([0, *sizes]).cumsum(0).tolist()
    batches = [list(range(a, b)) for a, b in zip(starts[:-1], starts[1:], strict=True)]
    rows = [{"x": x[i], "y": y[i]} for i in range(len(y))]
    return DataLoader(rows, batch_sampler=batches)


def trainer(root: object, **kwargs: object) -> L.Trainer:
    """A quiet CPU Trainer writing under `root`."""
    options = dict(
        default_root_dir=str(root),
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    return L.Trainer(**{**options, **kwargs})


def two_ranks(root: object, monkeypatch: pytest.MonkeyPatch) -> L.Trainer:
    """A quiet Trainer of two gloo ranks forked from this process (tests/training/forked_ranks.py), each given its
    own batches."""
    own_port(monkeypatch)
    return trainer(root, strategy="ddp_fork", devices=2, use_distributed_sampler=False)
