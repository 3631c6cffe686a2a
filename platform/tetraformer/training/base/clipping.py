"""Gradient clipping by norm with the step's norm already measured: the non-finite guard computes it, so clipping
need not walk every gradient a second time."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
from lightning.pytorch.utilities import GradClipAlgorithmType
from torch import Tensor
from torch.nn.utils import clip_grads_with_norm_
from torch.optim import Optimizer


def norm_is_whole(trainer: L.Trainer) -> bool:
    """Whether a norm of the local gradients is the norm clipping needs: one device, or DDP's all-reduced gradients
    under a precision that clips them as they are (no gradient scaler, no sharding, no engine of its own)."""
    plugin = trainer.precision_plugin
    plain = type(plugin) is Precision or (type(plugin) is MixedPrecision and plugin.scaler is None)
    return plain and type(trainer.strategy) in (SingleDeviceStrategy, DDPStrategy)


def clip_with_norm(
    trainer: L.Trainer, optimizer: Optimizer, clip_val: float | None, algorithm: str | None, norm: Tensor | None
) -> bool:
    """Clip the optimizer's gradients to `clip_val` by the step's measured `norm` and say so; False (nothing done)
    where that norm cannot stand in for clip_grad_norm_'s own: no norm, no clipping, by value, or another setup."""
    by_norm = GradClipAlgorithmType(algorithm or "norm") == GradClipAlgorithmType.NORM
    if norm is None or not clip_val or not by_norm or not norm_is_whole(trainer):
        return False
    clip_grads_with_norm_(trainer.precision_plugin.main_params(optimizer), clip_val, norm)  # clip_grad_norm_'s
    return True
