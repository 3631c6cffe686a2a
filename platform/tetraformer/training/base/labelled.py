"""Labelled tasks: LabelledTask (a TaskModule mixin) and LabelledData (a TaskDataModule mixin) share one vocabulary."""

from __future__ import annotations

from typing import Any

from tetraformer.data import DataError, LabelVocabulary, resolve_files
from tetraformer.data.hf_sources import class_names
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
    lora_trains_head = True  # with LoRA the classifier, new to the pretrained base, trains in full

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


class LabelledData:
    """One label vocabulary for every split: a checkpoint's (given through `use_spec`), else `--data.labels`, else
    the training split's. Mixed in before the datamodule base; the task says how to build and apply it."""

    vocabulary: LabelVocabulary | None
    fixed_labels: list[str] | None

    def settle_labels(self, training: bool) -> None:
        """Fix the vocabulary (when given or when the training split is read) and encode every split with it."""
        if self.vocabulary is None and (self.fixed_labels or training):
            self.vocabulary = self.training_vocabulary()
        if self.vocabulary is not None:
            self.use_labels(self.vocabulary)

    def training_vocabulary(self) -> LabelVocabulary:
        """`--data.labels` in their order, else the labels of the training split."""
        raise NotImplementedError

    def source_label_names(self, column: str) -> list[str] | None:
        """The names of the training source's ClassLabel column (a Parquet/Arrow/saved dataset's own label
        vocabulary, in its order), else None."""
        return class_names(resolve_files(self.require("train")), column)  # type: ignore[attr-defined]

    def use_labels(self, vocabulary: LabelVocabulary) -> None:
        """Encode the splits' labels with the vocabulary (an unknown label is a DataError listing the known ones)."""
        raise NotImplementedError
