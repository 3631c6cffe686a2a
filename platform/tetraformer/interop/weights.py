"""Checked tensor look-ups and the fused projections that differ between Hugging Face and the core."""

from __future__ import annotations

import torch
from torch import Tensor

from tetraformer.interop.errors import InteropError


class WeightReader:
    """Takes tensors out of a Hugging Face state dict, naming the key and both shapes when one does not fit."""

    def __init__(self, weights: dict[str, Tensor], source: str, prefix: str = "") -> None:
        self.weights, self.source, self.prefix, self.used = weights, source, prefix, set()

    def has(self, key: str) -> bool:
        """True when the (prefixed) key exists."""
        return self.prefix + key in self.weights

    def take(self, key: str, shape: tuple[int, ...] | None = None) -> Tensor:
        """The tensor at prefix + key, checked against an expected shape."""
        full = self.prefix + key
        if full not in self.weights:
            near = [k for k in self.weights if k.endswith(key.rsplit(".", 1)[-1])][:5]
            raise InteropError(f"{self.source}: missing tensor '{full}' (similar keys: {near})")
        tensor = self.weights[full]
        if shape is not None and tuple(tensor.shape) != tuple(shape):
            raise InteropError(
                f"{self.source}: tensor '{full}' has shape {tuple(tensor.shape)}, expected {tuple(shape)}"
            )
        self.used.add(full)
        return tensor

    def unused(self) -> list[str]:
        """Keys never taken (to report what a conversion ignored)."""
        return sorted(set(self.weights) - self.used)


def fill(target: dict[str, Tensor], key: str, value: Tensor) -> None:
    """Copy a converted tensor into a core state dict, naming the key and both shapes on mismatch."""
    if key not in target:
        raise InteropError(f"the core model has no parameter '{key}'")
    if target[key].shape != value.shape:
        raise InteropError(
            f"tensor for '{key}' has shape {tuple(value.shape)}, core expects {tuple(target[key].shape)}"
        )
    target[key] = value.to(target[key].dtype)


def fuse(*tensors: Tensor) -> Tensor:
    """Concatenate projection weights (or biases) along the output dimension, e.g. Q, K, V -> QKV."""
    return torch.cat(tensors, dim=0)


def split(tensor: Tensor, parts: int | tuple[int, ...]) -> list[Tensor]:
    """Undo `fuse`: equal chunks along the output dimension, or chunks of the given numbers of rows."""
    return list(tensor.chunk(parts, dim=0) if isinstance(parts, int) else tensor.split(parts, dim=0))
