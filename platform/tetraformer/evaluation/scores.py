"""The results file of `tetraformer evaluate`: per lm-eval task, each metric's value and standard error."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tetraformer.files import atomic_write
from tetraformer.training.reports.tables import markdown_table

Scores = dict[str, dict[str, dict[str, float | None]]]  # task -> metric -> {"value", "stderr"}


def harness_scores(results: dict[str, Any]) -> Scores:
    """lm-eval's `results` section (`acc,none`, `acc_stderr,none`, ...) as task -> metric -> value and stderr; a
    metric under a filter other than `none` keeps it in its name (`exact_match,strict-match`)."""
    scores: Scores = {}
    for task, values in results["results"].items():
        metrics: dict[str, dict[str, float | None]] = {}
        for key, value in values.items():
            metric, _, kept = key.partition(",")
            if not kept or metric.endswith("_stderr") or not _number(value):
                continue
            stderr = values.get(f"{metric}_stderr,{kept}")
            name = metric if kept == "none" else key
            metrics[name] = {"value": _finite(value), "stderr": _finite(stderr) if _number(stderr) else None}
        scores[task] = metrics
    return scores


def write_scores(path: Path, scores: Scores, **about: Any) -> Path:
    """Write the scores, with what they were measured on (`about`: checkpoint, settings, versions), as JSON."""
    text = json.dumps({**about, "scores": scores}, indent=2, sort_keys=False)
    return atomic_write(path, lambda out: out.write(text.encode("utf-8")))


def read_scores(path: Path) -> Scores:
    """The scores of a results file `write_scores` wrote."""
    return json.loads(Path(path).read_text(encoding="utf-8"))["scores"]


def flat_scores(scores: Scores) -> dict[str, float]:
    """`{"TASK/METRIC": value}`: one column per task metric, as `compare` reports them."""
    return {f"{task}/{metric}": cell["value"] for task, metrics in scores.items() for metric, cell in metrics.items()}


def scores_table(scores: Scores) -> str:
    """A Markdown table of the scores: task, metric, value (n/a: not finite), stderr."""
    rows = [
        [
            task,
            metric,
            "n/a" if cell["value"] is None else cell["value"],
            "" if cell["stderr"] is None else cell["stderr"],
        ]
        for task, metrics in scores.items()
        for metric, cell in metrics.items()
    ]
    return markdown_table(rows, ["task", "metric", "value", "stderr"])


def _cell(value: float | None, missing: str) -> float | str:
    """A table cell: the number, or `missing` for None."""
    return missing if value is None else value


def _number(value: Any) -> bool:
    """Whether a result cell is a number (lm-eval writes "N/A" for a stderr it did not compute)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: float) -> float | None:
    """The number as a float, None when infinite or NaN (JSON holds neither)."""
    return float(value) if math.isfinite(value) else None
