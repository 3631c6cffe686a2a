"""Under DDP the generation metrics score every process's sentences together (two CPU processes, gloo)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import sacrebleu
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.training.labelled import two_ranks
from tests.training.metrics.test_generation_metrics import HYPOTHESES, REFERENCES
from tetraformer.training.metrics.generation import generation_metrics

NAMES = ["bleu", "chrf", "rouge1"]


class Scorer(L.LightningModule):
    """Logs the generation metrics of the (hypothesis, reference) batches it is given to test."""

    def __init__(self) -> None:
        super().__init__()
        self.anchor = nn.Linear(1, 1)  # DDP wraps a module with parameters
        self.metrics = nn.ModuleDict(generation_metrics(NAMES))

    def test_step(self, batch: dict[str, list[str]], batch_idx: int) -> None:
        """Update each metric with the batch's strings and log it (computed and synced at epoch end)."""
        for name, metric in self.metrics.items():
            metric.update(batch["hypotheses"], batch["references"])
            self.log(f"test/{name}", metric)


class RankShares(L.LightningDataModule):
    """Rank 0 scores the first two sentences, rank 1 the other four: the shares differ in size."""

    def test_dataloader(self) -> DataLoader:
        """This rank's share, in batches of two."""
        share = slice(0, 2) if self.trainer.global_rank == 0 else slice(2, None)
        rows = list(zip(HYPOTHESES[share], REFERENCES[share], strict=True))
        return DataLoader(
            rows, batch_size=2, collate_fn=lambda b: {"hypotheses": [h for h, _ in b], "references": [r for _, r in b]}
        )


@pytest.mark.distributed
def test_ddp_generation_metrics_equal_the_full_data_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """BLEU, chrF and ROUGE-1 over two processes equal the scores of all six sentences on one."""
    torch.manual_seed(0)
    ddp = two_ranks(tmp_path, monkeypatch)
    result = ddp.test(Scorer(), datamodule=RankShares())[0]
    whole = generation_metrics(["rouge1"])["rouge1"]
    whole.update(HYPOTHESES, REFERENCES)
    assert result["test/bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score, abs=1e-4)
    assert result["test/chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score, abs=1e-4)
    assert result["test/rouge1"] == pytest.approx(whole.compute().item(), abs=1e-4)
    rank_zero_only = sacrebleu.corpus_bleu(HYPOTHESES[:2], [REFERENCES[:2]]).score
    assert abs(result["test/bleu"] - rank_zero_only) > 1.0  # an unsynced metric would fail
