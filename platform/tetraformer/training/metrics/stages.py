"""Epoch-level metrics: per-stage copies of a task's torchmetrics objects, and token-weighted perplexity."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassConfusionMatrix

from tetraformer.data.collate import IGNORE_INDEX

STAGES = ("train", "val", "test")
REPORT_STAGES = ("val", "test")  # stages whose per-class reports are written at epoch end


class TokenPerplexity(Metric):
    """exp(token-weighted mean NLL) over every batch seen, from each batch's mean NLL and its targets.

    A batch's weight is its number of targets other than `ignore_index`, so an uneven last batch counts
    for what it holds; the result is the perplexity of the whole epoch, not a mean of per-batch values.
    Unlike torchmetrics' Perplexity (logits in), it reuses the loss: no second softmax over the vocabulary.
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False
    nll_sum: Tensor
    tokens: Tensor

    def __init__(self, ignore_index: int = IGNORE_INDEX, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.ignore_index = ignore_index
        self.add_state("nll_sum", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("tokens", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, nll: Tensor, targets: Tensor) -> None:
        """Add a batch: `nll` its mean NLL over the counted targets (a scalar), `targets` its (B, T) ids."""
        tokens = (targets != self.ignore_index).sum().to(self.tokens.dtype)
        self.nll_sum += nll.detach().to(self.nll_sum.dtype) * tokens
        self.tokens += tokens

    def compute(self) -> Tensor:
        """exp(sum of NLL / number of tokens)."""
        return torch.exp(self.nll_sum / self.tokens)


def stage_copies(metrics: Mapping[str, Metric]) -> dict[str, nn.ModuleDict]:
    """One fresh copy of the task's metrics per stage (train, val, test)."""
    return {stage: nn.ModuleDict({name: m.clone() for name, m in metrics.items()}) for stage in STAGES}


def confusion_metric(num_labels: int) -> MulticlassConfusionMatrix:
    """A (true, predicted) count matrix over an epoch; targets equal to IGNORE_INDEX are skipped."""
    return MulticlassConfusionMatrix(num_classes=num_labels, ignore_index=IGNORE_INDEX)
