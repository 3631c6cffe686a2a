"""LabelledTask: a TaskModule mixin for tasks whose data is labelled through a LabelVocabulary."""

from __future__ import annotations

from typing import Any

from tetraformer.data import DataError, LabelVocabulary


class LabelledTask:
    """Keeps `self.vocabulary` and the datamodule's labels one: the model's (a checkpoint's) encodes the data.

    Mixed in before TaskModule (`class MyTask(LabelledTask, TaskModule)`). Before fit, validation and test, the
    datamodule's `use_labels(vocabulary)` gets the model's vocabulary; training data whose own labels differ
    from a checkpoint's is an error. `label_word` names the labels in that message ("labels", "tags").
    """

    vocabulary: LabelVocabulary | None
    label_word = "labels"

    def on_fit_start(self) -> None:
        """Share labels with the data, then the TaskModule's start (metrics)."""
        self.share_labels()
        super().on_fit_start()  # type: ignore[misc]

    def on_validation_start(self) -> None:
        """Share labels with the data before its labels are encoded."""
        self.share_labels()
        super().on_validation_start()  # type: ignore[misc]

    def on_test_start(self) -> None:
        """Share labels with the data before its labels are encoded."""
        self.share_labels()
        super().on_test_start()  # type: ignore[misc]

    def check_data(self, datamodule: Any) -> None:
        """A task's own check of the data against the model before labels are shared (none by default)."""

    def share_labels(self) -> None:
        """Encode the data's labels with this model's vocabulary; training labels that differ are an error."""
        datamodule = self.trainer.datamodule  # type: ignore[attr-defined]
        theirs = getattr(datamodule, "vocabulary", None)
        if datamodule is None or theirs is self.vocabulary:
            return
        self.check_data(datamodule)
        if theirs is not None and "train" in datamodule.datasets and theirs.names != self.vocabulary.names:
            raise DataError(
                f"the training data's {self.label_word} ({theirs.describe()}) differ from the "
                f"checkpoint's ({self.vocabulary.describe()})"
            )
        datamodule.use_labels(self.vocabulary)
