"""LabelledTask: a TaskModule mixin for tasks whose data is labelled through a LabelVocabulary."""

from __future__ import annotations

from typing import Any

from tetraformer.data import DataError, LabelVocabulary
from tetraformer.data.spec import DataSpec
from tetraformer.payload import PAYLOAD_KEY
from tetraformer.training.checkpointing.stored_spec import stored_spec


class LabelledTask:
    """The label vocabulary is the DataSpec's: the data's in training, the checkpoint's when evaluating one.

    Mixed in before TaskModule (`class MyTask(LabelledTask, TaskModule)`). Resuming training on data whose labels
    differ from the checkpoint's is an error; `label_word` names the labels in that message ("labels", "tags").
    """

    spec: DataSpec | None
    label_word = "labels"

    @property
    def vocabulary(self) -> LabelVocabulary | None:
        """The labels the network's outputs stand for."""
        return self.spec.labels if self.spec is not None else None

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Training data whose labels differ from the checkpoint's is an error; then the TaskModule's restore."""
        theirs, stored = self.vocabulary, stored_spec(checkpoint[PAYLOAD_KEY]).labels
        if theirs is not None and stored is not None and theirs.names != stored.names:
            raise DataError(
                f"the training data's {self.label_word} ({theirs.describe()}) differ from the "
                f"checkpoint's ({stored.describe()})"
            )
        super().on_load_checkpoint(checkpoint)  # type: ignore[misc]
