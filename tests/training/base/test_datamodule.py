"""TaskDataModule: batches of token rows are padded with the run tokenizer's pad id; a missing path names its flag."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from lightning.pytorch.trainer.states import TrainerFn

from tetraformer.data import IGNORE_INDEX
from tetraformer.errors import ConfigError
from tetraformer.training.base.datamodule import TaskDataModule


def test_default_collate_pads_with_the_tokenizer_pad_id() -> None:
    """Without a task collator, rows are padded (ids with pad_token_id, labels with -100) and masked."""
    data = TaskDataModule(batch_size=2)
    data.tokenizer = SimpleNamespace(pad_token_id=7)
    data.datasets["val"] = [{"input_ids": [1, 2, 3], "labels": [0, 1, 1]}, {"input_ids": [4], "labels": [1]}]
    batch = next(iter(data.val_dataloader()))
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 7, 7]]
    assert batch["labels"].tolist() == [[0, 1, 1], [1, IGNORE_INDEX, IGNORE_INDEX]]
    assert batch["attention_mask"].sum(1).tolist() == [3, 1]


@pytest.mark.parametrize(
    ("stage", "split", "flag"),
    [
        (TrainerFn.TESTING, TrainerFn.TESTING, "--data.test_path"),
        (TrainerFn.PREDICTING, TrainerFn.PREDICTING, "--data.predict_path"),
        (TrainerFn.FITTING, "train", "--data.train_path"),
        (TrainerFn.VALIDATING, "train", "--data.val_path"),  # validate reads val, else train's held-out share
    ],
)
def test_a_missing_path_names_its_flag(stage: TrainerFn, split: str, flag: str) -> None:
    """Lightning's stages (a str Enum) name the flag, not `TrainerFn.PREDICTING`; validate names --data.val_path."""
    data = TaskDataModule()
    data.trainer = SimpleNamespace(state=SimpleNamespace(fn=stage))  # type: ignore[assignment]
    with pytest.raises(ConfigError) as error:
        data.require(split)
    assert f"set {flag} to a file" in str(error.value) and "TrainerFn" not in str(error.value)
