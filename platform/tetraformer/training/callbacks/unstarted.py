"""A run that stops before its first batch takes back its logs, so a retry logs to the same version."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from tetraformer.training.reports.loggers import discard_logs


class DiscardUnstartedLogs(Callback):
    """On an error before the first batch (a data error in setup, a config error at trainer start), remove the
    logs/version_N folder and offline W&B run that Lightning started before setting up the data.

    Without it a corrected retry logs to version_1 beside an empty version_0, with a stray W&B run beside its own.
    The sanity check's validation batches log nothing, so they do not count as a start.
    """

    def __init__(self) -> None:
        self.started = False

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Training has started."""
        self.started = True

    def on_validation_batch_start(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        """A `validate` run has started (the sanity check does not count)."""
        self.started = self.started or not trainer.sanity_checking

    def on_test_batch_start(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        """A `test` run has started."""
        self.started = True

    def on_predict_batch_start(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        """A `predict` run has started."""
        self.started = True

    def on_exception(self, trainer: L.Trainer, pl_module: Any, exception: BaseException) -> None:
        """Take back the loggers' output when no batch ran (rank zero writes it)."""
        if not self.started and trainer.is_global_zero:
            discard_logs(trainer.loggers)
