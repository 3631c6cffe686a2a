"""TaskModule: the task's label vocabulary travels in the checkpoint through task_state."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.training.labelled import TinyClassifier, fixture, trainer, uneven_loader
from tetraformer.training.checkpointing.loading import load_task_module


def test_label_vocabulary_travels_in_the_checkpoint(tmp_path: Path) -> None:
    """task_state carries the LabelVocabulary: a module loaded from the checkpoint names the same labels."""
    x, y = fixture()
    module = TinyClassifier(labels=["x", "y", "z"])
    run = trainer(tmp_path)
    run.test(module, dataloaders=uneven_loader(x, y))
    run.save_checkpoint(tmp_path / "model.ckpt")
    loaded = load_task_module(tmp_path / "model.ckpt")
    assert loaded.label_names() == ["x", "y", "z"] != TinyClassifier().label_names()
    assert torch.equal(loaded.net(x), module.net(x))
