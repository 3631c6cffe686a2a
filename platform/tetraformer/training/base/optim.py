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
    warmup_steps: int = 0  # linear warm-up from 0 to lr, in optimizer steps
    warmup_fraction: float = 0.0  # or: warm-up as this share of the run's optimizer steps (0.05: the first 5%)
    min_lr_ratio: float = 0.1  # cosine/linear decay floor, as a fraction of lr
    fused: bool | None = None  # None: the fused kernel on CPU and CUDA (4x faster than the loop on CPU)

    def __post_init__(self) -> None:
        """Reject rates and shapes AdamW or the schedule cannot use: an OptionError names the field."""
        above(self, 0, eps=self.eps)  # lr 0 is allowed: a run that must not move the weights (tests, a frozen probe)
        at_least(self, 0, lr=self.lr, weight_decay=self.weight_decay, warmup_steps=self.warmup_steps)
        within(self, 0, 1, min_lr_ratio=self.min_lr_ratio)
        fraction, one_warmup = self.warmup_fraction, not (self.warmup_steps and self.warmup_fraction)
        require(self, "warmup_fraction", fraction, 0 <= fraction < 1, "must be 0 or more and less than 1")
        require(self, "warmup_fraction", fraction, one_warmup, "must be 0 when warmup_steps is set")
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


FEW_STEPS = 500  # a from-scratch Transformer run shorter than this is rarely what was meant (see check_schedule)
MANY_PASSES = 100  # nor is one that reads its training data more times than this


@dataclass(frozen=True)
class RunFit:
    """What the trainer says about a run's length, for check_schedule: the settings that sized it (`sized_by`),
    the limits that may stop it first (`ends_early`: --trainer.max_time, --run.max_tokens) and how many times it
    reads its training data (`passes`; None: the data has no length); `says` is False on the ranks after the first,
    so a DDP run logs its lines once."""

    sized_by: str = ""
    ends_early: tuple[str, ...] = ()
    passes: float | None = None
    says: bool = True


def warmup_steps(cfg: OptimizerConfig, total_steps: int | None) -> int:
    """The warm-up in optimizer steps: warmup_steps, or warmup_fraction of the run (0 when its length is unknown)."""
    if cfg.warmup_fraction and total_steps is not None:
        return max(round(cfg.warmup_fraction * total_steps), 1)
    return cfg.warmup_steps


def lr_factor(step: int, cfg: OptimizerConfig, total_steps: int | None, d_model: int = 512) -> float:
    """Multiplier of the base learning rate at an optimizer step; a run of unknown length (`total_steps` None)
    does not decay after its warm-up."""
    warmup = warmup_steps(cfg, total_steps)
    if cfg.schedule == "noam":  # Vaswani et al.: d^-0.5 * min(s^-0.5, s * w^-1.5), with lr as a multiplier
        s = max(step, 1)
        return d_model**-0.5 * min(s**-0.5, s * max(warmup, 1) ** -1.5)
    if step < warmup:
        return (step + 1) / warmup
    if cfg.schedule == "constant" or total_steps is None:
        return 1.0
    progress = min((step - warmup) / max(total_steps - warmup, 1), 1.0)
    shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if cfg.schedule == "cosine" else 1.0 - progress
    return cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * shape


def check_schedule(cfg: OptimizerConfig, total_steps: int | None, run: RunFit = RunFit()) -> list[tuple[int, str]]:
    """One (logging level, line) per way the schedule does not fit the run (`run` says what set its length, what
    may stop it first and how often it reads its data).

    - the run's length is unknown (it ends by time or tokens): the decay cannot be sized, nor a warm-up fraction;
    - the warm-up takes half of the optimizer steps or more: the rate peaks late, or never, and has no room to decay;
    - the run has under FEW_STEPS optimizer steps: a from-scratch Transformer learns little in them, and a schedule
      set by epochs on a small dataset (10 epochs of 5,000 images at batch 128: 390 steps) ends before it was
      meant to. Logged at INFO, as a short fine-tune is often meant;
    - the run reads its training data more than MANY_PASSES times (a token or step budget meant for more text):
      INFO, as a small corpus read many times can be meant;
    - a time or token limit may end the run first: the rate stops part-way down its decay (INFO: often a safety).
    """
    if total_steps is None:
        return _unsized(cfg, run.sized_by)
    notes = []
    warmup = warmup_steps(cfg, total_steps)
    if cfg.schedule != "noam" and warmup and 2 * warmup >= total_steps:
        notes.append((logging.WARNING, _late_peak(cfg, warmup, total_steps)))
    if total_steps < FEW_STEPS:
        notes.append((logging.INFO, _few_steps(cfg, total_steps, run.sized_by)))
    if run.passes is not None and run.passes > MANY_PASSES:
        notes.append((logging.INFO, _many_passes(total_steps, run)))
    if run.ends_early and cfg.schedule in ("cosine", "linear"):
        notes.append((logging.INFO, _ends_early(cfg, total_steps, run.sized_by, run.ends_early)))
    return notes


def _unsized(cfg: OptimizerConfig, sized_by: str) -> list[tuple[int, str]]:
    """The lines for a run whose length in optimizer steps is unknown."""
    fix = "; set --trainer.max_steps (or --trainer.max_epochs) to size the schedule"
    notes = []
    if cfg.schedule in ("cosine", "linear"):
        why = f" ({sized_by})" if sized_by else ""
        notes.append(
            (
                logging.WARNING,
                f"this run's length in optimizer steps is unknown{why}: the {cfg.schedule} decay cannot be sized, so "
                f"the learning rate stays at optim.lr after the warm-up{fix}",
            )
        )
    if cfg.warmup_fraction:
        notes.append(
            (
                logging.WARNING,
                f"optim.warmup_fraction={cfg.warmup_fraction} has no run length to be a fraction of: no warm-up{fix} "
                "or use optim.warmup_steps",
            )
        )
    return notes


def _late_peak(cfg: OptimizerConfig, warmup: int, total_steps: int) -> str:
    """The line for a warm-up of half the run or more."""
    if cfg.warmup_fraction:
        setting, fix = f"optim.warmup_fraction={cfg.warmup_fraction} ({warmup} steps)", "warmup_fraction"
    else:
        setting, fix = f"optim.warmup_steps={warmup}", "warmup_steps"
    return (
        f"{setting} is {warmup / max(total_steps, 1):.0%} of this run's {total_steps} optimizer steps: the learning "
        + ("rate never reaches optim.lr" if warmup >= total_steps else "rate peaks late and has little room to decay")
        + f"; lower --model.optim.{fix} (a few percent of the steps is usual) or train for more steps"
    )


def _few_steps(cfg: OptimizerConfig, total_steps: int, sized_by: str) -> str:
    """The line for a run of under FEW_STEPS optimizer steps."""
    why = f" ({sized_by})" if sized_by else ""
    return (
        f"this run's {cfg.schedule} schedule has {total_steps} optimizer steps{why}, few for training from scratch "
        "(a fine-tune may need no more): warm-up and decay follow the run's length, so --trainer.max_steps N sizes "
        "it whatever the dataset's size"
    )


def _many_passes(total_steps: int, run: RunFit) -> str:
    """The line for a run that reads its training data more than MANY_PASSES times."""
    why = f" ({run.sized_by})" if run.sized_by else ""
    return (
        f"this run's {total_steps} optimizer steps{why} read its training data {run.passes:,.0f} times: a model "
        "trained from scratch fits the training text better than new text long before that; validation keeps the "
        "best weights in best.ckpt, --run.early_stopping_patience N stops when they stop improving, and fewer steps "
        "or tokens (or more data) fit the budget to the data"
    )


def _ends_early(cfg: OptimizerConfig, total_steps: int, sized_by: str, ends_early: tuple[str, ...]) -> str:
    """The line for a run that a time or token limit may stop before its schedule ends."""
    why = f" ({sized_by})" if sized_by else ""
    return (
        f"{' or '.join(ends_early)} may end this run before its {total_steps} optimizer steps{why}: the learning "
        f"rate then stops part-way down its {cfg.schedule} decay; --trainer.max_steps sizes the schedule to the run "
        "you expect"
    )


def build_optimizer(
    model: nn.Module,
    cfg: OptimizerConfig,
    total_steps: int | None,
    d_model: int,
    run: RunFit = RunFit(),
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the no-decay groups and a per-step LambdaLR schedule over `total_steps` (None: unknown), with one
    log line per way the schedule does not fit the run (check_schedule says which)."""
    for level, line in check_schedule(cfg, total_steps, run) if run.says else ():
        log.log(level, line)
    fused = cfg.fused if cfg.fused is not None else next(model.parameters()).device.type in ("cpu", "cuda")
    optimizer = torch.optim.AdamW(
        param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=fused or None
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg, total_steps, d_model))
    return optimizer, scheduler
