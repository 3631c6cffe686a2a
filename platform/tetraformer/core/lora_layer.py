"""LoRALinear: a frozen Linear plus low-rank adapters on slices of its output, optionally DoRA.

It is the Linear it replaces (same `weight` and `bias` tensors, so the state-dict names stay) plus, per adapted
slice of its output, A (rank x in, Kaiming-uniform) and B (slice x rank, zeros): a new adapter adds nothing. The
fused q/k/v projection of self-attention takes one adapter per adapted role, on its slice.

DoRA (Liu et al., 2024) adds a trained magnitude per output row of each slice, m (initialised to the rows' norms):
the slice's weight is m * (W + s BA) / ||W + s BA||, the norm taken per row and, while training, treated as a
constant (detached), as PEFT's `use_dora` computes it (peft/tuners/lora/dora.py), dropout path included.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LoRALinear(nn.Linear):
    """A frozen Linear plus low-rank adapters on slices of its output: y = x W^T + b + scale * B_i A_i x (DoRA:
    each slice's rows rescaled to their magnitudes m_i)."""

    def __init__(
        self,
        base: nn.Linear,
        slices: list[tuple[int, int]],
        rank: int,
        scale: float,
        dropout: float = 0.0,
        dora: bool = False,
    ) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight, self.bias = base.weight, base.bias  # the same tensors: tied weights stay tied
        self.weight.requires_grad_(False)
        if self.bias is not None:
            self.bias.requires_grad_(False)
        self.slices, self.scale, self.merged, self.disabled = slices, scale, False, False
        kw = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_a = nn.ParameterList(torch.empty(rank, self.in_features, **kw) for _ in slices)
        self.lora_b = nn.ParameterList(torch.zeros(end - start, rank, **kw) for start, end in slices)
        for a in self.lora_a:
            nn.init.kaiming_uniform_(a, a=math.sqrt(5))  # as nn.Linear and PEFT initialise A
        self.lora_dropout = nn.Dropout(dropout)
        self.lora_m: nn.ParameterList | None = None  # DoRA's magnitudes, one (slice,) vector per slice
        if dora:
            with torch.no_grad():
                norms = [self.weight[start:end].norm(dim=1) for start, end in slices]  # B = 0: ||W|| per row
            self.lora_m = nn.ParameterList(norms)
        self._factors: list[Tensor] = []  # DoRA's m / ||W + s BA|| of the merged weight, to unmerge it

    def forward(self, x: Tensor) -> Tensor:
        """The base projection plus each slice's adapter (none once merged or disabled)."""
        y = F.linear(x, self.weight, self.bias)
        if self.merged or self.disabled:
            return y
        h = self.lora_dropout(x) if self.training else x
        deltas = [self._slice_delta(i, h, y) for i in range(len(self.slices))]
        if self.slices == [(0, self.out_features)]:
            return y + deltas[0]
        bounds = sorted({0, self.out_features, *(s for pair in self.slices for s in pair)})
        parts = list(y.split([end - start for start, end in zip(bounds, bounds[1:], strict=False)], -1))
        for (start, _), delta in zip(self.slices, deltas, strict=True):
            index = bounds.index(start)  # slices do not overlap: each is one part
            parts[index] = parts[index] + delta
        return torch.cat(parts, -1)

    def _slice_delta(self, i: int, h: Tensor, y: Tensor) -> Tensor:
        """What slice i's adapter adds to the base output y (..., out), from the (dropped-out) input h: (..., n_i)."""
        a, b = self.lora_a[i], self.lora_b[i]
        delta = F.linear(F.linear(h, a), b) * self.scale  # (..., n_i)
        if self.lora_m is None:
            return delta
        start, end = self.slices[i]
        with torch.no_grad():  # the norm is a constant to the gradient (DoRA section 4.3; PEFT detaches it too)
            norm = torch.linalg.norm(self.weight[start:end] + self.scale * (b @ a), dim=1)  # (n_i,)
        factor = self.lora_m[i] / norm  # (n_i,)
        if self.training and self.lora_dropout.p > 0:  # PEFT: the dropped-out input through the frozen rows
            base = F.linear(h, self.weight[start:end])
        else:
            base = y[..., start:end] if self.bias is None else y[..., start:end] - self.bias[start:end]
        return ((factor - 1) * base + factor * delta).to(y.dtype)  # the fp32 factor kept out of bf16 outputs

    def folded(self, i: int) -> tuple[Tensor, Tensor | None]:
        """Slice i's rows W + s BA in fp32 (n_i x in), and DoRA's m / ||W + s BA|| per row (None without DoRA),
        from the unmerged weight."""
        start, end = self.slices[i]
        rows = self.weight[start:end].float() + self.scale * (self.lora_b[i].float() @ self.lora_a[i].float())
        return rows, None if self.lora_m is None else self.lora_m[i].float() / rows.norm(dim=1)

    def merged_weight(self) -> Tensor:
        """The whole weight with every adapter folded in, in fp32 (out x in), from the unmerged weight."""
        weight = self.weight.detach().float().clone()
        for i, (start, end) in enumerate(self.slices):
            rows, factor = self.folded(i)
            weight[start:end] = (rows if factor is None else factor[:, None] * rows).detach()
        return weight

    def merge(self) -> None:
        """Fold the adapters into the weight (in fp32, then cast to its dtype); forward then skips them."""
        if not self.merged:
            with torch.no_grad():
                self._factors = [factor for i in range(len(self.slices)) if (factor := self.folded(i)[1]) is not None]
                self.weight.copy_(self.merged_weight().to(self.weight.dtype))
            self.merged = True

    def unmerge(self) -> None:
        """Take the adapters back out of the weight (exact in fp32; within rounding in lower precision)."""
        if self.merged:
            with torch.no_grad():
                weight = self.weight.float().clone()
                for i, (start, end) in enumerate(self.slices):
                    rows = weight[start:end] / self._factors[i][:, None] if self._factors else weight[start:end]
                    weight[start:end] = rows - self.scale * (self.lora_b[i].float() @ self.lora_a[i].float())
                self.weight.copy_(weight.to(self.weight.dtype))
            self.merged = False

    def extra_repr(self) -> str:
        """Shape, rank, the adapted slices and DoRA."""
        dora = ", dora" if self.lora_m is not None else ""
        return f"{super().extra_repr()}, rank={self.lora_a[0].shape[0]}, slices={self.slices}{dora}"
