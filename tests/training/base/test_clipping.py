"""Clipping by the step's measured gradient norm: the same gradients as clip_grad_norm_, to the bit, and only where
a local norm is the norm clipping needs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy, SingleDeviceStrategy
from torch import nn
from torch.nn.utils import get_total_norm

import tetraformer.training.base.module as module_file
from tests.tasks.language_modeling.conftest import TEXT, tiny_config
from tetraformer.cli import main
from tetraformer.training.base.clipping import clip_with_norm, norm_is_whole
from tetraformer.training.checkpointing.loading import load_task_module


def trainer(precision: Precision | None = None, strategy: object = None) -> SimpleNamespace:
    """The two things clip_with_norm reads off a Trainer."""
    strategy = strategy or SingleDeviceStrategy(device=torch.device("cpu"))
    return SimpleNamespace(precision_plugin=precision or Precision(), strategy=strategy)


def net_with_gradients() -> tuple[nn.Module, torch.optim.Optimizer]:
    """Two layers in two parameter groups with gradients of a seeded loss; one parameter without a gradient."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4), nn.Linear(4, 4))
    groups = [{"params": net[0].parameters()}, {"params": [*net[1].parameters(), *net[2].parameters()]}]
    optimizer = torch.optim.AdamW(groups, lr=0.1)
    net[1](net[0](torch.randn(32, 8))).pow(2).sum().backward()  # net[2] gets no gradient
    return net, optimizer


def test_gradients_equal_clip_grad_norm_to_the_bit() -> None:
    ours, optimizer = net_with_gradients()
    theirs, _ = net_with_gradients()
    grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    assert clip_with_norm(trainer(), optimizer, 0.5, None, get_total_norm(grads))
    norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
    assert norm > 0.5  # clipping did scale them
    for mine, reference in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert (mine.grad is None) == (reference.grad is None)
        if mine.grad is not None:
            assert torch.equal(mine.grad, reference.grad)


@pytest.mark.parametrize(
    ("setup", "clip_val", "algorithm", "measured"),
    [
        ({}, 0.5, None, False),  # no norm measured this step
        ({}, None, None, True),  # no clipping asked for
        ({}, 0.0, None, True),
        ({}, 0.5, "value", True),  # clipping by value
        ({"precision": MixedPrecision("16-mixed", "cpu", torch.amp.GradScaler("cpu"))}, 0.5, None, True),
        ({"strategy": FSDPStrategy()}, 0.5, None, True),  # sharded gradients: a local norm is a shard's
    ],
)
def test_leaves_other_cases_to_lightning(
    setup: dict, clip_val: float | None, algorithm: str | None, measured: bool
) -> None:
    net, optimizer = net_with_gradients()
    before = [p.grad.clone() for p in net[:2].parameters()]
    norm = torch.tensor(100.0) if measured else None
    assert not clip_with_norm(trainer(**setup), optimizer, clip_val, algorithm, norm)
    assert all(torch.equal(p.grad, g) for p, g in zip(net[:2].parameters(), before, strict=True))


def test_whole_norms() -> None:
    assert norm_is_whole(trainer())
    assert norm_is_whole(trainer(MixedPrecision("bf16-mixed", "cpu")))
    assert norm_is_whole(trainer(strategy=DDPStrategy()))  # gradients all-reduced before the hook
    assert not norm_is_whole(trainer(strategy=FSDPStrategy()))


def clipped_fit(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, torch.Tensor]:
    """A tiny language model fitted with every step's gradients clipped (clip value 0.01); its final weights."""
    text_file = root.parent / "corpus.txt"
    text_file.write_text(TEXT * 12, encoding="utf-8")
    config = tiny_config(root, train_path=str(text_file))
    config["trainer"]["gradient_clip_val"] = 0.01
    path = root.parent / f"{root.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("WANDB_SILENT", "true")
    main(["fit", "-c", str(path)])
    return load_task_module(root / "checkpoints" / "last.ckpt").net.state_dict()


@pytest.mark.slow
def test_a_fit_measures_the_norm_once_and_trains_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the non-finite guard's norm, a clipped fit never calls clip_grad_norm_, and ends on the weights that
    Lightning's own clipping (which measures the norm again) gives."""
    calls = []
    lightning_clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: calls.append(1) or lightning_clip(*a, **k))
    reused = clipped_fit(tmp_path / "reused", monkeypatch)
    assert not calls
    monkeypatch.setattr(module_file, "clip_with_norm", lambda *args: False)
    measured_again = clipped_fit(tmp_path / "lightning", monkeypatch)
    assert len(calls) == 20  # Lightning's path: once a step
    assert reused.keys() == measured_again.keys()
    assert all(torch.equal(reused[name], measured_again[name]) for name in reused)
