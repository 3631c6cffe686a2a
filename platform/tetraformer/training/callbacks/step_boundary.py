"""Which train batches end an optimizer step: callbacks that act per step skip gradient-accumulation batches."""

from __future__ import annotations

import lightning as L


class StepBoundary:
    """Remembers the last optimizer step seen; `crossed` is True once per new step."""

    def __init__(self) -> None:
        self.step = -1

    def crossed(self, trainer: L.Trainer) -> bool:
        """True when this batch ended an optimizer step not seen before (False while accumulating gradients)."""
        if trainer.global_step == self.step:
            return False
        self.step = trainer.global_step
        return True
