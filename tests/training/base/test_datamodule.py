"""TaskDataModule: batches of token rows are padded with the run tokenizer's pad id by default."""

from __future__ import annotations

from types import SimpleNamespace

from tetraformer.data import IGNORE_INDEX
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
