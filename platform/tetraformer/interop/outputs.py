"""What imported models return: Hugging Face's output field names over the core's tensors."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class ModelOutput:
    """`.logits` for models with a head, `.last_hidden_state` (and `.pooler_output`) for base models."""

    logits: Tensor | None = None
    last_hidden_state: Tensor | None = None
    pooler_output: Tensor | None = None
