"""Class weights for a classifier's loss: given per class, or balanced from the training labels' counts."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from tetraformer.errors import ConfigError


def balanced_class_weights(counts: Sequence[int], rows: int) -> Tensor:
    """(C,) weights rows / (classes * rows of the class), as scikit-learn's "balanced"; an unseen class counts 1."""
    seen = torch.tensor(list(counts), dtype=torch.float).clamp(min=1.0)  # (C,)
    return rows / (len(seen) * seen)


def given_class_weights(values: Sequence[float], classes: int) -> Tensor:
    """(C,) weights from `--model.class_weights`, one per label."""
    if len(values) != classes:
        raise ConfigError(f"--model.class_weights has {len(values)} values for {classes} labels")
    return torch.tensor(list(values), dtype=torch.float)
