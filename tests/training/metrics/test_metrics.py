"""Epoch-level metrics: computed over the whole split through a real Trainer, not averaged per batch."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from sklearn.metrics import f1_score

from tests.training.labelled import BATCH_SIZES, TinyClassifier, fixture, trainer, uneven_loader
from tetraformer.training.metrics.stages import TokenPerplexity


@pytest.mark.parametrize("stage", ["test", "validate"])
def test_macro_f1_equals_sklearn_over_uneven_batches(stage: str, tmp_path: Path) -> None:
    """`{stage}/f1` equals scikit-learn's macro-F1 of the whole split; the mean of per-batch F1 does not."""
    x, y = fixture()
    module = TinyClassifier()
    results = getattr(trainer(tmp_path), stage)(module, dataloaders=uneven_loader(x, y))[0]
    with torch.no_grad():
        preds = module.net(x).argmax(-1)
    key = "test" if stage == "test" else "val"
    expected = f1_score(y, preds, average="macro")
    assert results[f"{key}/f1"] == pytest.approx(expected, abs=1e-6)
    assert results[f"{key}/acc"] == pytest.approx((preds == y).float().mean().item(), abs=1e-6)
    per_batch = [
        f1_score(yb, pb, average="macro") for yb, pb in zip(y.split(BATCH_SIZES), preds.split(BATCH_SIZES), strict=True)
    ]
    assert abs(sum(per_batch) / len(per_batch) - expected) > 0.02  # the fixture tells the two apart


def test_metrics_are_stage_copies_on_the_module(tmp_path: Path) -> None:
    """Each stage has its own metric objects, registered as submodules, and none enters the checkpoint."""
    x, y = fixture()
    module = TinyClassifier()
    trainer(tmp_path).validate(module, dataloaders=uneven_loader(x, y))
    objects = {id(getattr(module, f"{stage}_metrics")["f1"]) for stage in ("train", "val", "test")}
    assert len(objects) == 3
    names = dict(module.named_modules())
    assert {"train_metrics.f1", "val_metrics.f1", "test_metrics.f1", "confusion.test"} <= set(names)
    assert all(key.startswith("net.") for key in module.state_dict())


def test_train_metrics_are_logged_per_step_and_validation_per_epoch(tmp_path: Path) -> None:
    """train/f1 is each step's value (like train/loss); val/f1 is one value per validation."""
    x, y = fixture()
    logger = CSVLogger(tmp_path, name="logs")
    fit = trainer(tmp_path, logger=logger, max_epochs=1, log_every_n_steps=1, limit_val_batches=None)
    fit.fit(TinyClassifier(), train_dataloaders=uneven_loader(x, y), val_dataloaders=uneven_loader(x, y))
    text = (Path(logger.log_dir) / "metrics.csv").read_text().splitlines()
    header = text[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in text[1:]]
    assert sum(1 for r in rows if r["train/f1"]) == len(BATCH_SIZES)
    assert sum(1 for r in rows if r["val/f1"]) == 1


def test_perplexity_weights_batches_by_their_tokens() -> None:
    """Perplexity of uneven batches is exp(total NLL / total tokens), ignoring -100 targets."""
    metric = TokenPerplexity()
    batches = [(torch.tensor(2.0), torch.ones(4, 8)), (torch.tensor(1.0), torch.ones(1, 8))]
    masked = torch.ones(2, 8)
    masked[:, 4:] = -100  # 8 counted targets of 16
    batches.append((torch.tensor(3.0), masked))
    for nll, targets in batches:
        metric.update(nll, targets)
    expected = math.exp((2.0 * 32 + 1.0 * 8 + 3.0 * 8) / (32 + 8 + 8))
    assert metric.compute().item() == pytest.approx(expected, rel=1e-6)
    mean_of_batches = (math.exp(2.0) + math.exp(1.0) + math.exp(3.0)) / 3
    assert metric.compute().item() != pytest.approx(mean_of_batches, rel=1e-3)
