"""DataSpecHandover: gives the module the datamodule's DataSpec once the data is set up, before the network is built."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback


class DataSpecHandover(Callback):
    """Hands `datamodule.spec()` to the module's `use_spec` in the `setup` hook.

    Lightning calls it on every rank after the datamodule's `prepare_data` (the run's tokenizer trained) and
    `setup` (labels and statistics read from the training split), and before `configure_model` builds the
    network. The CLI adds it; code that drives a Trainer by hand adds it the same way. A module that already has
    a spec or a network (a second stage in the same process) keeps them.
    """

    def __init__(self, datamodule: Any) -> None:
        self.datamodule = datamodule

    def setup(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        """Hand the data's spec over, once."""
        if pl_module.spec is None and pl_module.net is None:
            pl_module.use_spec(self.datamodule.spec())
