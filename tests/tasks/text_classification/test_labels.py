"""Multi-label training at a threshold, and class weights."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import last_metrics, predictions
from tests.tasks.text_classification.conftest import multi_label_rows, write_jsonl
from tetraformer.training.checkpointing.loading import load_task_module


def fit_multi_label(run_cli: Callable[..., Path], tmp_path: Path, *args: str) -> Path:
    """A multi-label fit (labels at threshold 0.5) of the keyword fixture's one- or two-label rows; its run dir."""
    train = write_jsonl(tmp_path / "train.jsonl", multi_label_rows(240, 0))
    val = write_jsonl(tmp_path / "val.jsonl", multi_label_rows(60, 1))
    return run_cli(
        "fit",
        *args,
        model={"threshold": 0.5},
        train_path=str(train),
        val_path=str(val),
        label_field="labels",
        multi_label=True,
    )


def predict_at_threshold(run: Path, tmp_path: Path) -> tuple[list[dict], list[dict]]:
    """(rows, predictions) of six multi-label rows predicted from the run's checkpoint alone, after checking that
    the checkpoint has no single-label confusion report and that each prediction is every label over the threshold."""
    ckpt = run / "checkpoints" / "last.ckpt"
    assert load_task_module(ckpt).label_names() is None  # no single-label confusion report
    rows = multi_label_rows(6, 2)
    out = predictions(ckpt, write_jsonl(tmp_path / "p.jsonl", rows), tmp_path / "p")
    assert len(out) == len(rows)
    for record in out:
        over = sorted(label for label, p in record["probabilities"].items() if p >= 0.5)
        assert record["predicted"] == over  # top-3 of 3 labels: every probability is listed
    return rows, out


def test_multi_label_predicts_every_label_over_the_threshold(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """Multi-label validation logs micro/macro F1; predict returns every label over the threshold."""
    run = fit_multi_label(run_cli, tmp_path, "--trainer.max_steps", "2")
    assert {"val/f1_micro", "val/f1_macro"} <= set(last_metrics(run))
    predict_at_threshold(run, tmp_path)


@pytest.mark.learning
def test_multi_label_learns_and_predicts_at_threshold(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """Micro/macro F1 at the threshold rise well above chance; predict returns every label over the threshold."""
    run = fit_multi_label(run_cli, tmp_path)
    metrics = last_metrics(run)
    assert metrics["val/f1_micro"] > 0.8 and metrics["val/f1_macro"] > 0.8, metrics
    _, out = predict_at_threshold(run, tmp_path)
    assert sum(r["predicted"] == r["labels"] for r in out) >= 4


@pytest.mark.parametrize("weights", ["balanced", [1.0, 2.0, 3.0]])
def test_class_weights_train(run_cli: Callable[..., Path], splits: dict[str, Path], weights: object) -> None:
    """Balanced and explicit class weights train."""
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "2",
        model={"class_weights": weights},
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    assert (run / "checkpoints" / "last.ckpt").is_file()


def test_wrong_number_of_class_weights(
    run_cli: Callable[..., Path], splits: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Two weights for three labels: one error line naming both counts, exit code 2."""
    with pytest.raises(SystemExit) as stop:
        run_cli(
            "fit", model={"class_weights": [1.0, 2.0]}, train_path=str(splits["train"]), val_path=str(splits["val"])
        )
    assert stop.value.code == 2
    assert "error: --model.class_weights has 2 values for 3 labels" in capsys.readouterr().err
