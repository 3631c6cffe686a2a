"""Multi-label training at a threshold, class weights, and the test-stage per-class report and confusion matrix."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import last_metrics
from tests.tasks.text_classification.conftest import multi_label_rows, write_csv, write_jsonl
from tetraformer.cli import main
from tetraformer.training.checkpointing.loading import load_task_module


@pytest.mark.learning
def test_multi_label_learns_and_predicts_at_threshold(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """Micro/macro F1 at the threshold rise well above chance; predict returns every label over the threshold."""
    train = write_jsonl(tmp_path / "train.jsonl", multi_label_rows(240, 0))
    val = write_jsonl(tmp_path / "val.jsonl", multi_label_rows(60, 1))
    run = run_cli(
        "fit",
        model={"threshold": 0.5},
        train_path=str(train),
        val_path=str(val),
        label_field="labels",
        multi_label=True,
    )
    metrics = last_metrics(run)
    assert metrics["val/f1_micro"] > 0.8 and metrics["val/f1_macro"] > 0.8, metrics
    ckpt = run / "checkpoints" / "last.ckpt"
    assert load_task_module(ckpt).label_names() is None  # no single-label confusion report
    rows = multi_label_rows(6, 2)
    main(
        [
            "predict",
            "--ckpt_path",
            str(ckpt),
            "--data.predict_path",
            str(write_jsonl(tmp_path / "p.jsonl", rows)),
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(tmp_path / "p"),
        ]
    )
    written = tmp_path / "p" / "eval" / "predict-1" / "predictions.jsonl"
    out = [json.loads(line) for line in written.read_text().splitlines()]
    for record in out:
        over = sorted(label for label, p in record["probabilities"].items() if p >= 0.5)
        assert record["predicted"] == over  # top-3 of 3 labels: every probability is listed
    assert sum(r["predicted"] == r["labels"] for r in out) >= 4


@pytest.mark.parametrize("weights", ["balanced", [1.0, 2.0, 3.0]])
def test_class_weights_train(run_cli: Callable[..., Path], splits: dict[str, Path], weights: object) -> None:
    """Balanced and explicit class weights train; a list of the wrong length is an error naming both counts."""
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "3",
        model={"class_weights": weights},
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    assert (run / "checkpoints" / "last.ckpt").is_file()


def test_wrong_number_of_class_weights(
    run_cli: Callable[..., Path], splits: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Two weights for three labels: one error line, exit code 2."""
    with pytest.raises(SystemExit) as stop:
        run_cli(
            "fit", model={"class_weights": [1.0, 2.0]}, train_path=str(splits["train"]), val_path=str(splits["val"])
        )
    assert stop.value.code == 2
    assert "error: --model.class_weights has 2 values for 3 labels" in capsys.readouterr().err


def test_test_stage_writes_per_class_report_and_confusion(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path
) -> None:
    """`test` from the checkpoint alone reports accuracy, macro-F1, per-class P/R/F1 and a confusion matrix."""
    run = run_cli("fit", "--trainer.max_epochs", "2", train_path=str(splits["train"]), val_path=str(splits["val"]))
    test_dir = tmp_path / "t"
    main(
        [
            "test",
            "--ckpt_path",
            str(run / "checkpoints" / "last.ckpt"),
            "--data.test_path",
            str(splits["test"]),
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(test_dir),
        ]
    )
    assert {"test/acc", "test/f1_macro"} <= set(last_metrics(test_dir, "test"))
    reports = test_dir / "eval" / "test-1" / "reports"
    with (reports / "test_per_class.csv").open(encoding="utf-8") as f:
        labels = [row[0] for row in csv.reader(f)][1:]
    assert labels[:3] == ["food", "money", "sport"]
    assert (reports / "test_confusion.png").is_file()


def test_unseen_test_label_from_checkpoint(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A test label the checkpoint's vocabulary lacks is an error at its row, listing the known labels."""
    run = run_cli("fit", "--trainer.max_steps", "2", train_path=str(splits["train"]), val_path=str(splits["val"]))
    bad = write_csv(tmp_path / "bad_test.csv", [{"text": "goal", "label": "sport"}, {"text": "x", "label": "art"}])
    with pytest.raises(SystemExit):
        main(
            [
                "test",
                "--ckpt_path",
                str(run / "checkpoints" / "last.ckpt"),
                "--data.test_path",
                str(bad),
                "--run.wandb",
                "disabled",
                "--trainer.default_root_dir",
                str(tmp_path / "t"),
            ]
        )
    assert "bad_test.csv:3: unknown label 'art'; known labels: 'food', 'money', 'sport'\n" in capsys.readouterr().err
