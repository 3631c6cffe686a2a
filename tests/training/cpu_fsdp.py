"""Lightning's FSDPStrategy made to run on CPU processes (gloo), for tests only: neither Lightning nor torch's FSDP
supports CPU (Lightning refuses `fsdp` without accelerator cuda/gpu; FSDP raises "FSDP needs a non-CPU accelerator
device" unless given device_id=cpu). The subclass passes Lightning's exact-type check and wraps the module itself
with device_id=cpu; the Block policy is the platform's. Full-state-dict checkpoints crash on CPU (a segfault in
FSDP's state_dict clone), so runs with it keep checkpointing off. Its ranks are forked from the process that fits
(tests/training/forked_ranks.py), so a test runs it in-process without a fresh interpreter per rank.
"""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch.strategies import FSDPStrategy
from lightning.pytorch.strategies.launchers.multiprocessing import _MultiProcessingLauncher
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel

from tetraformer.training.distributed.strategies import FSDP_UNITS


class CPUFSDP(FSDPStrategy):
    """FSDPStrategy over gloo on CPU, full-shard with one unit per core Block."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(auto_wrap_policy=FSDP_UNITS, process_group_backend="gloo", **kwargs)

    def _setup_model(self, model: nn.Module) -> nn.Module:
        """Wrap as Lightning would, with the CPU device FSDP needs named explicitly."""
        wrapped = FullyShardedDataParallel(
            model, device_id=torch.device("cpu"), sharding_strategy=self.sharding_strategy, **self.kwargs
        )
        return super()._setup_model(wrapped)

    def _configure_launcher(self) -> None:
        """Fork the ranks from this process (Lightning's FSDPStrategy always starts fresh script processes)."""
        self._launcher = _MultiProcessingLauncher(self, start_method="fork")
