"""Key/value caches for incremental decoding."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class LayerCache:
    """One layer's cached self-attention keys/values and (fixed) cross-attention keys/values."""

    self_kv: tuple[Tensor, Tensor] | None = None  # (B, H, T_seen, Dh) each
    cross_kv: tuple[Tensor, Tensor] | None = None  # (B, H, S, Dh) each

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add new self-attention keys/values; return all keys/values seen so far."""
        if self.self_kv is not None:
            k = torch.cat((self.self_kv[0], k), dim=2)
            v = torch.cat((self.self_kv[1], v), dim=2)
        self.self_kv = (k, v)
        return k, v


@dataclass
class KVCache:
    """The cache of a whole decoder stack; `offset` counts the positions already decoded."""

    layers: list[LayerCache] = field(default_factory=list)
    offset: int = 0

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        """A cache with nothing in it yet."""
        return cls([LayerCache() for _ in range(n_layers)])

    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam search reorders hypotheses after each step)."""
        for layer in self.layers:
            if layer.self_kv is not None:
                layer.self_kv = tuple(t.index_select(0, index) for t in layer.self_kv)
            if layer.cross_kv is not None:
                layer.cross_kv = tuple(t.index_select(0, index) for t in layer.cross_kv)
