"""Ensemble: K networks of one shape, each from its own initial weights, read side by side."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn


class Ensemble(nn.Module):
    """K networks of one shape whose outputs stack on a new first dimension.

    Each member trains on its own loss over the same batches; the task pools their scores. It has no Hugging Face
    counterpart, so it does not export.
    """

    def __init__(self, members: list[nn.Module]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)

    @property
    def cfg(self) -> object:
        """The first member's architecture (all members share it)."""
        return self.members[0].cfg

    @property
    def backbone(self) -> nn.Module:
        """The first member's backbone (all members have the same kind)."""
        return self.members[0].backbone

    def forward(self, *args: Tensor, **kw: Tensor) -> Tensor:
        """The members' inputs -> (K, ...): each member's output."""
        return torch.stack([member(*args, **kw) for member in self.members])


def build_ensemble(make: Callable[[], nn.Module], size: int) -> nn.Module:
    """`make()`'s network for size 1; else an Ensemble of `size` of them, initialised one after another."""
    members = [make() for _ in range(size)]
    return members[0] if size == 1 else Ensemble(members)


def ensemble_members(net: nn.Module) -> list[nn.Module]:
    """The networks whose scores are pooled: an Ensemble's members, or the network itself."""
    return list(net.members) if isinstance(net, Ensemble) else [net]


def member_outputs(net: nn.Module, *args: Tensor, **kw: Tensor) -> Tensor:
    """(K, ...) outputs of the network's members: an Ensemble's stack, or the single network's with K = 1."""
    out = net(*args, **kw)
    return out if isinstance(net, Ensemble) else out.unsqueeze(0)
