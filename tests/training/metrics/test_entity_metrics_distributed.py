"""Under DDP, EntityScore and its report rows cover every process's sentences (two CPU processes, gloo)."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import pytest
from seqeval.metrics import classification_report, f1_score
from torch import Tensor, nn
from torch.utils.data import DataLoader
from torchmetrics import Metric

from tests.training.labelled import two_ranks
from tests.training.metrics.test_entity_metrics import LABELS, padded, random_sentences
from tetraformer.core.config import TransformerConfig
from tetraformer.training.base.module import TaskModule
from tetraformer.training.metrics.entity import EntityScore

SENTENCES = random_sentences(2, 30)
SIZES = [(9, 2), (1, 0), (4, 3), (11, 1), (2, 0), (3, 4)]  # (sentences, extra padding) per batch, in order


class ReplayTagger(TaskModule):
    """Returns the fixture's predictions as its own; reports the test epoch's entity rows from rank zero."""

    needs_spec = False  # its network needs nothing from the data

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A parameter for DDP to hold; the predictions come with the batch."""
        return nn.Linear(1, 1)

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """A zero loss, the batch's predictions and targets."""
        loss = self.net.weight.sum() * 0.0
        return {"loss": loss, "preds": batch["preds"], "targets": batch["targets"]}

    def make_metrics(self) -> dict[str, Metric]:
        """Entity F1."""
        return {"entity_f1": EntityScore(LABELS)}

    def on_test_epoch_end(self) -> None:
        """Every rank gathers the rows; rank zero writes them."""
        rows = self.test_metrics["entity_f1"].report_rows()
        if self.trainer.is_global_zero:
            (Path(self.trainer.default_root_dir) / "rows.json").write_text(json.dumps(rows))


class RankHalves(L.LightningDataModule):
    """Rank 0 tests the first three uneven batches, rank 1 the last three."""

    def test_dataloader(self) -> DataLoader:
        """This rank's batches, as padded (B, W) tensors."""
        true, pred = SENTENCES
        batches, start = [], 0
        for size, extra in SIZES:
            part = slice(start, start + size)
            width = max(map(len, true[part])) + extra
            batches.append({"preds": padded(pred[part], width), "targets": padded(true[part], width)})
            start += size
        half = len(SIZES) // 2
        return DataLoader(batches[:half] if self.trainer.global_rank == 0 else batches[half:], batch_size=None)


@pytest.mark.distributed
def test_ddp_entity_f1_and_rows_cover_all_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """test/entity_f1 over two processes, and the rows rank zero writes, are seqeval's on the whole fixture."""
    true, pred = SENTENCES
    assert sum(size for size, _ in SIZES) == len(true)
    ddp = two_ranks(tmp_path, monkeypatch)
    result = ddp.test(ReplayTagger(), datamodule=RankHalves())[0]
    assert result["test/entity_f1"] == pytest.approx(f1_score(true, pred, zero_division=0), abs=1e-6)
    rows = json.loads((tmp_path / "rows.json").read_text())
    report = classification_report(true, pred, output_dict=True, zero_division=0)
    assert [row[0] for row in rows] == [*sorted(k for k in report if not k.endswith(" avg")), "micro avg", "macro avg"]
    for name, *ratios, support in rows:
        expected = [report[name][k] for k in ("precision", "recall", "f1-score", "support")]
        assert [*ratios, support] == pytest.approx(expected)
    half = sum(size for size, _ in SIZES[: len(SIZES) // 2])
    for share in (slice(0, half), slice(half, None)):  # neither rank alone has the whole value
        assert f1_score(true[share], pred[share]) != pytest.approx(result["test/entity_f1"], abs=0.01)
