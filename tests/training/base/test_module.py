"""TaskModule: the task's label vocabulary travels in the checkpoint through task_state; bf16 CPU runs take accel's
measured Linear layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from tests.training.labelled import TinyClassifier, fixture, trainer, uneven_loader
from tetraformer.accel import LayoutLinear
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


@pytest.mark.parametrize(
    ("precision", "compiled", "expected"),
    [
        ("32-true", False, nn.Linear),
        ("bf16-mixed", False, LayoutLinear),
        ("bf16-true", False, LayoutLinear),
        ("bf16-mixed", True, nn.Linear),
    ],
)
def test_cpu_bf16_runs_take_the_measured_layouts(
    tmp_path: Path, precision: str, compiled: bool, expected: type[nn.Module]
) -> None:
    """On a CPU in bf16 the network's Linear layers become accel's LayoutLinear (the same parameters and state-dict
    keys); fp32 and torch.compile keep stock nn.Linear."""
    x, y = fixture()
    module = TinyClassifier()
    module.compile_network = compiled  # the tiny net has no Block to compile: only the choice of layers changes
    trainer(tmp_path, precision=precision).test(module, dataloaders=uneven_loader(x, y))
    assert type(module.net.linear) is expected
    assert list(module.net.state_dict()) == ["linear.weight", "linear.bias"]
