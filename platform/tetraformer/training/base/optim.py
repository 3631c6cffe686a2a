"""AdamW with the usual no-decay groups, and learning-rate schedules."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from tetraformer.errors import above, at_least, require, within

log = logging.getLogger(__name__)

Schedule = Literal["cosine", "linear", "constant", "noam"]
NO_DECAY_TYPES = (nn.LayerNorm, nn.RMSNorm, nn.Embedding)


@dataclass
class OptimizerConfig:
    """AdamW and its learning-rate schedule."""

    lr: float = 3e-4
    weight_decay: float = 0.1  # applied to matrices only: never to norms, biases or embeddings
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    schedule: Schedule = "cosine"
    warmup_steps: int = 0  # linear warm-up from 0 to lr
    min_lr_ratio: float = 0.1  # cosine/linear decay floor, as a fraction of lr
    fused: bool | None = None  # None: the fused kernel on CPU and CUDA (4x faster than the loop on CPU)

    def __post_init__(self) -> None:
        """Reject rates and shapes AdamW or the schedule cannot use: an OptionError names the field."""
        above(self, 0, eps=self.eps)  # lr 0 is allowed: a run that must not move the weights (tests, a frozen probe)
        at_least(self, 0, lr=self.lr, weight_decay=self.weight_decay, warmup_steps=self.warmup_steps)
        within(self, 0, 1, min_lr_ratio=self.min_lr_ratio)
        betas_ok = len(self.betas) == 2 and all(0 <= beta < 1 for beta in self.betas)
        require(self, "betas", self.betas, betas_ok, "must be two numbers, each 0 or more and less than 1")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: decayed weight matrices, and undecayed norms, biases and embeddings."""
    no_decay: set[int] = set()
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if isinstance(module, NO_DECAY_TYPES) or name == "bias" or param.ndim < 2:
                no_decay.add(id(param))
    params = {id(p): p for p in model.parameters() if p.requires_grad}  # tied weights appear once
    decay = [p for i, p in params.items() if i not in no_decay]
    rest = [p for i, p in params.items() if i in no_decay]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def lr_factor(step: int, cfg: OptimizerConfig, total_steps: int, d_model: int = 512) -> float:
    """Multiplier of the base learning rate at an optimizer step."""
    warmup = max(cfg.warmup_steps, 0)
    if cfg.schedule == "noam":  # Vaswani et al.: d^-0.5 * min(s^-0.5, s * w^-1.5), with lr as a multiplier
        s = max(step, 1)
        return d_model**-0.5 * min(s**-0.5, s * max(warmup, 1) ** -1.5)
    if step < warmup:
        return (step + 1) / warmup
    if cfg.schedule == "constant":
        return 1.0
    progress = min((step - warmup) / max(total_steps - warmup, 1), 1.0)
    shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if cfg.schedule == "cosine" else 1.0 - progress
    return cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * shape


def check_schedule(cfg: OptimizerConfig, total_steps: int) -> str | None:
    """A warning when the warm-up does not fit the run: it takes half of the optimizer steps or more (the rate
    peaks late, or never, and the decay has no room); None when it fits."""
    if cfg.schedule == "noam" or cfg.warmup_steps == 0 or 2 * cfg.warmup_steps < total_steps:
        return None
    return (
        f"optim.warmup_steps={cfg.warmup_steps} is {cfg.warmup_steps / max(total_steps, 1):.0%} of this run's "
        f"{total_steps} optimizer steps: the learning rate "
        + ("never reaches optim.lr" if cfg.warmup_steps >= total_steps else "peaks late and has little room to decay")
        + "; lower --model.optim.warmup_steps (a few percent of the steps is usual) or train for more steps"
    )


def build_optimizer(
    model: nn.Module, cfg: OptimizerConfig, total_steps: int, d_model: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the no-decay groups and a per-step LambdaLR schedule (a warning when the warm-up does not fit)."""
    warning = check_schedule(cfg, total_steps)
    if warning:
        log.warning(warning)
    fused = cfg.fused if cfg.fused is not None else next(model.parameters()).device.type in ("cpu", "cuda")
    optimizer = torch.optim.AdamW(
        param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=fused or None
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg, total_steps, d_model))
    return optimizer, scheduler
