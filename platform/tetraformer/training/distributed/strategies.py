"""Trainer strategies by name: Lightning's own, with the core's Block as FSDP's sharding unit."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import lightning as L
from lightning.pytorch.strategies import FSDPStrategy, Strategy, StrategyRegistry
from torch.distributed.fsdp import FullyShardedDataParallel

from tetraformer.core.layers import Block

log = logging.getLogger(__name__)
FSDP_UNITS = {Block}  # each Transformer block is one FSDP unit; embeddings and heads stay in the root unit


def fsdp_strategy(**options: Any) -> FSDPStrategy:
    """Lightning's FSDPStrategy, full-shard by default, wrapping every core Block as one unit."""
    return FSDPStrategy(**{"auto_wrap_policy": FSDP_UNITS, "sharding_strategy": "FULL_SHARD", **options})


def platform_strategy(strategy: str | Strategy) -> str | Strategy:
    """The strategy a Trainer gets: a registered FSDP name (`fsdp`, `fsdp_cpu_offload`) gains the Block wrapping
    policy; any other name, and any Strategy object a config builds itself, is left to Lightning as given."""
    if not isinstance(strategy, str) or strategy not in FSDPStrategy.get_registered_strategies():
        return strategy
    log.info("strategy %s: sharding each %s as one FSDP unit", strategy, Block.__name__)
    return fsdp_strategy(**StrategyRegistry[strategy]["init_params"])


def forward_needs_every_rank(trainer: L.Trainer) -> bool:
    """True when FSDP shards the weights: then a forward pass outside the training loop (a sample, an attention
    map) gathers them from every rank, so every rank must run it, inside `gathered_weights`."""
    return isinstance(trainer.strategy, FSDPStrategy)


def gathered_weights(trainer: L.Trainer) -> AbstractContextManager:
    """Inside: a network method called directly (not through the Trainer's step) sees whole weights under FSDP.

    FSDP gathers the root unit's weights (embeddings, heads) only inside the wrapped module's forward; this
    gathers them for the duration (every rank must enter), while each Block unit still gathers its own on call.
    """
    if not forward_needs_every_rank(trainer):
        return nullcontext()
    return FullyShardedDataParallel.summon_full_params(trainer.strategy.model, recurse=False, writeback=False)
