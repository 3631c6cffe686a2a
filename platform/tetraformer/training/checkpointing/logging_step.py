"""The loggers' step a checkpoint carries, right when a validation that training's stop asked for saved it."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.trainer.states import TrainerFn

LOOP_STATE = ("loops", "fit_loop", "epoch_loop.state_dict")  # where a checkpoint keeps `_batches_that_stepped`


class LoggingStep(Callback):
    """Counts the batch a validation follows in the loggers' step of a checkpoint it saves, where no resume would.

    Lightning counts a batch for its loggers (`_batches_that_stepped`, the step of metrics.csv and W&B rows) only
    after the validation that follows it, so best.ckpt and last.ckpt saved by that validation hold the count before
    the batch. Lightning 2.6 completes the count on `fit --ckpt_path` by replaying that loop iteration, which it does
    only where the validation interval falls. A validation run because training was asked to stop between intervals
    (FinalValidation at --trainer.max_steps, TokenBudget, max_time) is not replayed, `should_stop` not being in the
    checkpoint: the resumed fit would log every row one step low and could log a train step twice.
    """

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        """Count the batch in the checkpoint's loggers' step when a resume would not."""
        if _uncounted_on_resume(trainer):
            loops, fit, epoch = LOOP_STATE
            checkpoint[loops][fit][epoch]["_batches_that_stepped"] += 1


def _uncounted_on_resume(trainer: L.Trainer) -> bool:
    """Whether this save is in a fit's validation after a stepping batch, off the interval a resume replays."""
    if trainer.state.fn != TrainerFn.FITTING or not trainer.validating or trainer.sanity_checking:
        return False
    loop = trainer.fit_loop.epoch_loop
    if loop._should_accumulate():  # the batch ended no optimizer step: Lightning does not count it either
        return False
    # Lightning's own rule for the validation a resume replays, asked as a resumed run asks it: without should_stop
    stop, trainer.should_stop = trainer.should_stop, False
    try:
        return not loop._should_check_val_fx(trainer.fit_loop._data_fetcher)
    finally:
        trainer.should_stop = stop
