"""Key/value caches for incremental decoding, preallocated and written in place.

Each layer keeps its self-attention keys/values in (B, H, capacity, Dh) buffers and writes a step's new
ones into the next free time slots, so a decoding step copies only its own keys/values (torch.cat would
copy the whole past each step). `KVCache.reserve(n)` sizes the buffers for n positions before the first
write; without it a buffer starts at what the first write needs and doubles when full. When the new
keys/values need gradients (a cache used in training), appends concatenate instead: an in-place write
would overwrite what backward needs.

With a sliding window (Mistral) a layer keeps only what later queries can see: an append returns the
window - 1 latest cached keys/values plus the new ones, and a full buffer moves its latest window to the
front instead of growing, so memory stays about two windows whatever the length decoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

KV = tuple[Tensor, Tensor]


class LayerCache:
    """One layer's cached self-attention keys/values and (fixed) cross-attention keys/values."""

    def __init__(
        self, self_kv: KV | None = None, cross_kv: KV | None = None, capacity: int = 0, window: int | None = None
    ) -> None:
        self.cross_kv = cross_kv  # (B, H, S, Dh) each
        self.capacity = capacity  # time slots the first write allocates (0: just what it needs)
        self.window = window  # sliding window: how many latest positions a query sees (None: all)
        self._kv: KV | None = None  # (B, H, capacity, Dh) each
        self._owned = False  # the buffers were allocated here, so in-place writes touch no caller's tensor
        self._spare: KV | None = None  # buffers of the same shape that beam reorders write into
        self.length = 0  # time slots filled
        self.self_kv = self_kv

    @property
    def self_kv(self) -> KV | None:
        """(B, H, T_seen, Dh) keys and values seen so far (views of the buffers), or None."""
        if self._kv is None:
            return None
        return self._kv[0][:, :, : self.length], self._kv[1][:, :, : self.length]

    @self_kv.setter
    def self_kv(self, kv: KV | None) -> None:
        """Replace the cached keys/values (a later append copies them into a buffer of its own)."""
        self._kv, self.length, self._owned = kv, kv[0].shape[2] if kv is not None else 0, False

    def append(self, k: Tensor, v: Tensor) -> KV:
        """Add new (B, H, T, Dh) self-attention keys/values; return all keys/values seen so far."""
        if k.requires_grad or v.requires_grad:
            return self._concatenate(k, v)
        t = k.shape[2]
        full = self._kv is not None and self.length + t > self._kv[0].shape[2]
        if self.window is not None and self._owned and full and self.length >= self.window:
            self._keep_latest(self.window)
        end = self.length + t
        if not self._owned or end > self._kv[0].shape[2]:
            self._grow(k, v, end)
        self._kv[0][:, :, self.length : end] = k
        self._kv[1][:, :, self.length : end] = v
        self.length = end
        return self._visible(t)

    @property
    def slots(self) -> int:
        """Time slots allocated (what the cache holds in memory)."""
        return self._kv[0].shape[2] if self._kv is not None else 0

    def _visible(self, new: int) -> KV:
        """What the `new` latest positions attend: everything, or the window - 1 positions before them and them."""
        start = 0 if self.window is None else max(0, self.length - new - (self.window - 1))
        return self._kv[0][:, :, start : self.length], self._kv[1][:, :, start : self.length]

    def _keep_latest(self, n: int) -> None:
        """Move the n latest cached positions to the front of the buffers and forget the older ones."""
        for buffer in self._kv:
            buffer[:, :, :n] = buffer[:, :, self.length - n : self.length].clone()
        self.length = n

    def reorder(self, index: Tensor, cross: bool = True) -> None:
        """Select (and repeat) batch rows by a (N,) index; cross=False leaves the cross K/V as they are."""
        if self._kv is not None:
            n = self.length
            self._kv, self._owned = tuple(_select(t, index, n) for t in self._kv), True
        if cross and self.cross_kv is not None:
            self.cross_kv = tuple(t.index_select(0, index) for t in self.cross_kv)

    def reorder_beams(self, index: Tensor) -> None:
        """Select self-attention rows by a (B,) index of the same size, into spare buffers (no allocation).

        The cross K/V stay: beam search moves rows only among the rows of one source.
        """
        if not self._owned or len(index) != self._kv[0].shape[0]:
            self.reorder(index, cross=False)
            return
        if self._spare is None or self._spare[0].shape != self._kv[0].shape:
            self._spare = (torch.empty_like(self._kv[0]), torch.empty_like(self._kv[1]))
        n = self.length
        for src, dst in zip(self._kv, self._spare, strict=True):
            torch.index_select(src[:, :, :n], 0, index, out=dst[:, :, :n])  # (B, H, T_seen, Dh)
        self._kv, self._spare = self._spare, self._kv

    def _grow(self, k: Tensor, v: Tensor, needed: int) -> None:
        """Allocate buffers for at least `needed` time slots (and k's batch size), keeping what is cached."""
        old = self.self_kv
        size = max(needed, self.capacity, 2 * self._kv[0].shape[2] if self._kv is not None else 0)
        b, h, _, d = k.shape
        self._kv, self._owned = (k.new_empty(b, h, size, d), v.new_empty(b, h, size, v.shape[-1])), True
        if old is not None:
            self._kv[0][:, :, : self.length] = old[0]
            self._kv[1][:, :, : self.length] = old[1]

    def _concatenate(self, k: Tensor, v: Tensor) -> KV:
        """The autograd-safe append: new tensors holding the old and the new keys/values."""
        if self._kv is not None:
            old_k, old_v = self._visible(0)
            k, v = torch.cat((old_k, k), dim=2), torch.cat((old_v, v), dim=2)
        self.self_kv = (k, v)
        return k, v


def _select(buffer: Tensor, index: Tensor, length: int) -> Tensor:
    """A new (N, H, capacity, Dh) buffer holding the first `length` slots of the indexed rows."""
    if length == buffer.shape[2]:
        return buffer.index_select(0, index)
    out = buffer.new_empty(len(index), *buffer.shape[1:])
    out[:, :, :length] = buffer[:, :, :length].index_select(0, index)
    return out


@dataclass
class KVCache:
    """The cache of a whole decoder stack; `offset` counts the positions already decoded."""

    layers: list[LayerCache] = field(default_factory=list)
    offset: int = 0
    capacity: int = 0  # positions reserved ahead (0: none)
    position_bias: Tensor | None = None  # (1, H, capacity, capacity) score bias, sliced each step

    @classmethod
    def empty(cls, n_layers: int, window: int | None = None) -> KVCache:
        """A cache with nothing in it yet; `window` keeps only a sliding window's latest positions."""
        return cls([LayerCache(window=window) for _ in range(n_layers)])

    def reserve(self, positions: int) -> KVCache:
        """Size every layer's buffers for `positions` time slots in all (at most two windows), before decoding."""
        self.capacity = positions
        for layer in self.layers:
            layer.capacity = positions if layer.window is None else min(positions, 2 * layer.window)
        return self

    def reorder(self, index: Tensor, cross: bool = True) -> None:
        """Select batch rows (beam search reorders hypotheses after each step).

        cross=False keeps the cross-attention K/V: right when rows only move among rows of the same source.
        """
        for layer in self.layers:
            layer.reorder(index, cross)

    def reorder_beams(self, index: Tensor) -> None:
        """Select rows by an index of the batch's size, among rows of the same source (a beam search step)."""
        for layer in self.layers:
            layer.reorder_beams(index)
