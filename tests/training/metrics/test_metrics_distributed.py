"""Under DDP the epoch metrics and the confusion matrix cover every process's batches (two CPU processes)."""

from __future__ import annotations

import csv
from pathlib import Path

import lightning as L
import pytest
import torch
from sklearn.metrics import confusion_matrix, f1_score
from torch.utils.data import DataLoader

from tests.training.labelled import (
    BATCH_SIZES,
    LABELS,
    LinearNet,
    TinyClassifier,
    fixture,
    two_ranks,
    uneven_loader,
)
from tetraformer.core.config import TransformerConfig


class RankHalves(L.LightningDataModule):
    """Rank 0 tests the first half of the uneven batches, rank 1 the second half."""

    def test_dataloader(self) -> DataLoader:
        """This rank's share of the fixture."""
        x, y = fixture()
        half = len(BATCH_SIZES) // 2
        sizes = BATCH_SIZES[:half] if self.trainer.global_rank == 0 else BATCH_SIZES[half:]
        cut = sum(BATCH_SIZES[:half])
        share = slice(0, cut) if self.trainer.global_rank == 0 else slice(cut, None)
        return uneven_loader(x[share], y[share], sizes)


@pytest.mark.distributed
def test_ddp_metrics_and_reports_cover_all_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """test/f1 over two processes equals scikit-learn's on the whole split; rank zero's report counts all."""
    ddp = two_ranks(tmp_path, monkeypatch)
    result = ddp.test(TinyClassifier(), datamodule=RankHalves())[0]
    x, y = fixture()
    with torch.no_grad():
        preds = LinearNet(TransformerConfig())(x).argmax(-1)
    assert result["test/f1"] == pytest.approx(f1_score(y, preds, average="macro"), abs=1e-6)
    with (tmp_path / "reports" / "test_confusion.csv").open() as f:
        counts = [[int(v) for v in row[1:]] for row in list(csv.reader(f))[1:]]
    assert counts == confusion_matrix(y, preds, labels=range(len(LABELS))).tolist()
