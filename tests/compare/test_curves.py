"""Validation curves from a run's metrics.csv files, and their mean over seeds."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from tetraformer.compare.curves import mean_curve, monitor_curve


def write_metrics(path: Path, rows: list[list[object]]) -> None:
    """A Lightning-style metrics.csv with train rows (no val/loss) among the validation rows."""
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([["step", "train/loss", "val/loss", "time/elapsed_s"], *rows])


def test_monitor_curve_reads_validation_rows_and_resumed_versions(tmp_path: Path) -> None:
    """Only rows with the monitor count; a resumed run's later version overrides a step it repeats."""
    write_metrics(tmp_path / "logs/version_0/metrics.csv", [[4, 3.0, "", ""], [5, "", 2.5, 10.0], [10, "", 2.0, 20.0]])
    write_metrics(tmp_path / "logs/version_1/metrics.csv", [[10, "", 1.9, 21.0], [15, "", 1.5, ""]])
    curve = monitor_curve(tmp_path, "val/loss")
    assert curve.steps.tolist() == [5, 10, 15]
    assert curve.values.tolist() == [2.5, 1.9, 1.5]
    assert curve.elapsed_s[:2].tolist() == [10.0, 21.0] and np.isnan(curve.elapsed_s[2])


def test_mean_curve_over_seeds() -> None:
    """Mean and sample standard deviation per step; a step only one seed has keeps its value with std 0."""
    steps, means, stds = mean_curve([(np.array([5, 10]), np.array([2.0, 1.0])), (np.array([5]), np.array([4.0]))])
    assert steps.tolist() == [5, 10]
    assert means.tolist() == [3.0, 1.0]
    assert np.allclose(stds, [np.sqrt(2.0), 0.0])
