"""Validation curves of a run, read from its Lightning CSV logs (RUN_DIR/logs/version_N/metrics.csv)."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ELAPSED = "time/elapsed_s"  # seconds since the run started, on validation rows


@dataclass
class Curve:
    """A metric at each validation of one run: (N,) steps, (N,) elapsed seconds (NaN if unknown), (N,) values."""

    steps: np.ndarray
    elapsed_s: np.ndarray
    values: np.ndarray


def monitor_curve(run_dir: Path, monitor: str) -> Curve:
    """The monitor's validation rows of every metrics.csv under RUN_DIR/logs, by step (a resumed run's last wins)."""
    points: dict[int, tuple[float, float]] = {}
    for path in sorted((run_dir / "logs").glob("**/metrics.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                value = _number(row.get(monitor))
                if not math.isnan(value):
                    points[int(float(row["step"]))] = (_number(row.get(ELAPSED)), value)
    steps = sorted(points)
    return Curve(
        np.array(steps, dtype=np.int64),
        np.array([points[s][0] for s in steps], dtype=np.float64),
        np.array([points[s][1] for s in steps], dtype=np.float64),
    )


def _number(text: str | None) -> float:
    """A CSV cell as a float, NaN when empty or absent."""
    return float(text) if text not in (None, "") else math.nan


def mean_curve(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, std) over several (steps, values) curves at every step any of them has; std 0 for one value."""
    by_step: dict[int, list[float]] = {}
    for steps, values in curves:
        for step, value in zip(steps.tolist(), values.tolist(), strict=True):
            by_step.setdefault(step, []).append(value)
    steps = sorted(by_step)
    means = np.array([np.mean(by_step[s]) for s in steps], dtype=np.float64)
    stds = np.array([np.std(by_step[s], ddof=1) if len(by_step[s]) > 1 else 0.0 for s in steps], dtype=np.float64)
    return np.array(steps, dtype=np.int64), means, stds
