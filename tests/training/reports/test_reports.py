"""Per-class reports and confusion matrices: values as scikit-learn's, files under RUN_DIR/reports, W&B."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import WandbLogger
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

from tests.training.labelled import LABELS, TinyClassifier, fixture, trainer, uneven_loader
from tests.training.wandb_records import history_rows
from tetraformer.cli.app import finish_wandb
from tetraformer.training.reports.tables import COLUMNS, markdown_table, per_class_rows, write_reports, write_table

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_rows_match_sklearn_with_an_unseen_label() -> None:
    """Per-class P/R/F1/support and the macro/micro rows equal scikit-learn's; an unseen label gets zeros."""
    y_true = [0, 0, 1, 1, 1, 2, 2, 0, 1]
    y_pred = [0, 1, 1, 1, 2, 2, 0, 0, 0]
    labels = ["a", "b", "c", "never"]
    rows = per_class_rows(confusion_matrix(y_true, y_pred, labels=range(4)), labels)
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=range(3), zero_division=0)
    for i, name in enumerate(labels[:3]):
        assert rows[i] == [name, pytest.approx(p[i]), pytest.approx(r[i]), pytest.approx(f[i]), int(s[i])]
    assert rows[3] == ["never", 0.0, 0.0, 0.0, 0]
    for average, row in (("macro", rows[4]), ("micro", rows[5])):
        expected = precision_recall_fscore_support(y_true, y_pred, average=average, zero_division=0)[:3]
        assert row == [f"{average} avg", *map(pytest.approx, expected), len(y_true)]


def test_files_csv_markdown_and_png(tmp_path: Path) -> None:
    """write_reports leaves a CSV with the report columns, a Markdown table, a count CSV and a valid PNG."""
    matrix = np.array([[3, 1], [0, 2]])
    paths = write_reports(tmp_path, "test", matrix, ["x|y", "z"])
    assert {p.name for p in (tmp_path / "reports").iterdir()} == {
        "test_per_class.csv",
        "test_per_class.md",
        "test_confusion.csv",
        "test_confusion.png",
    }
    with paths["per_class_csv"].open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == COLUMNS == ["label", "precision", "recall", "f1", "support"]
    assert [r[0] for r in rows[1:]] == ["x|y", "z", "macro avg", "micro avg"]
    assert float(rows[1][2]) == pytest.approx(0.75) and rows[3][4] == "6"
    markdown = paths["per_class_md"].read_text().splitlines()
    assert markdown[0] == "| label | precision | recall | f1 | support |" and len(markdown) == 2 + 4
    assert markdown[2].startswith("| x\\|y | 1.0000 | 0.7500 |")
    with paths["confusion_csv"].open() as f:
        assert list(csv.reader(f)) == [["true \\ predicted", "x|y", "z"], ["x|y", "3", "1"], ["z", "0", "2"]]
    assert paths["confusion_png"].read_bytes().startswith(PNG_SIGNATURE)
    assert markdown_table(per_class_rows(matrix, ["x|y", "z"])) == paths["per_class_md"].read_text()


def test_test_and_validate_write_reports_of_the_epoch(tmp_path: Path) -> None:
    """Trainer.test/validate of a task that names its labels writes RUN_DIR/reports from the whole split."""
    x, y = fixture()
    module = TinyClassifier()
    trainer(tmp_path).test(module, dataloaders=uneven_loader(x, y))
    trainer(tmp_path).validate(module, dataloaders=uneven_loader(x, y))
    with torch.no_grad():
        preds = module.net(x).argmax(-1)
    for stage in ("test", "val"):
        with (tmp_path / "reports" / f"{stage}_confusion.csv").open() as f:
            counts = [[int(v) for v in row[1:]] for row in list(csv.reader(f))[1:]]
        assert counts == confusion_matrix(y, preds, labels=range(len(LABELS))).tolist()
        with (tmp_path / "reports" / f"{stage}_per_class.csv").open() as f:
            supports = [int(row["support"]) for row in csv.DictReader(f)][: len(LABELS)]
        assert supports == torch.bincount(y, minlength=len(LABELS)).tolist()


def test_reports_go_to_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-class table and the confusion picture are logged to W&B under test/..."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    x, y = fixture()
    logger = WandbLogger(save_dir=str(tmp_path), project="reports", offline=True)
    run = trainer(tmp_path, logger=logger)
    run.test(TinyClassifier(), dataloaders=uneven_loader(x, y))
    finish_wandb(run)
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    keys = {k for row in history_rows(run_file) for k in row}
    assert {"test/per_class/_type", "test/confusion/_type", "test/f1"} <= keys, keys


class TableRecorder:
    """Stands in for a WandbLogger: records the tables logged to it."""

    def __init__(self) -> None:
        self.tables: list[dict] = []

    def log_table(self, **kwargs: object) -> None:
        """Keep the call's arguments."""
        self.tables.append(kwargs)


def test_write_table_any_columns(tmp_path: Path) -> None:
    """Any columns: a CSV of the rows, a Markdown table (floats with 4 decimals, `|` escaped), a W&B table."""
    columns = ["type", "precision", "support", "note"]
    rows = [["PER", 0.5, 2, "a|b"], ["micro avg", 2 / 3, 5, ""]]
    recorder = TableRecorder()
    paths = write_table(tmp_path, "test_entities", columns, rows, recorder, key="test/entities", step=3)
    assert paths == {"csv": tmp_path / "reports" / "test_entities.csv", "md": tmp_path / "reports" / "test_entities.md"}
    with paths["csv"].open() as f:
        assert list(csv.reader(f)) == [columns, ["PER", "0.5", "2", "a|b"], ["micro avg", str(2 / 3), "5", ""]]
    assert paths["md"].read_text().splitlines() == [
        "| type | precision | support | note |",
        "|---|---:|---:|---:|",
        "| PER | 0.5000 | 2 | a\\|b |",
        "| micro avg | 0.6667 | 5 |  |",
    ]
    assert recorder.tables == [dict(key="test/entities", columns=columns, data=rows, step=3)]
    write_table(tmp_path, "plain", columns, rows, recorder)
    assert recorder.tables[-1]["key"] == "plain"
