"""Reports of an epoch: tables (CSV, Markdown) and confusion matrices (CSV, PNG) in RUN_DIR/reports, and W&B."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

import numpy as np
from lightning.pytorch.loggers import WandbLogger

from tetraformer.training.reports.plots import confusion_matrix_png

log = logging.getLogger(__name__)
COLUMNS = ["label", "precision", "recall", "f1", "support"]


def per_class_rows(confusion: np.ndarray, labels: list[str]) -> list[list[Any]]:
    """[label, precision, recall, f1, support] per class, then "macro avg" and "micro avg" rows.

    `confusion[i, j]` counts examples of true label i predicted as j. As in scikit-learn, a ratio with a zero
    denominator is 0 and the macro average runs over the labels that occur as a target or a prediction.
    """
    counts = np.asarray(confusion, dtype=np.float64)  # (C, C)
    hits, support, predicted = np.diag(counts), counts.sum(axis=1), counts.sum(axis=0)
    precision, recall = _ratio(hits, predicted), _ratio(hits, support)
    f1 = _ratio(2 * hits, support + predicted)  # 2PR / (P + R), with 0 where nothing was seen
    rows: list[list[Any]] = [
        [name, float(p), float(r), float(f), int(s)]
        for name, p, r, f, s in zip(labels, precision, recall, f1, support, strict=True)
    ]
    seen = support + predicted > 0
    total = int(support.sum())
    macro = [float(v[seen].mean()) if seen.any() else 0.0 for v in (precision, recall, f1)]
    micro = [_ratio(hits.sum(), predicted.sum()), _ratio(hits.sum(), support.sum())]
    micro.append(_ratio(2 * hits.sum(), support.sum() + predicted.sum()))
    rows.append(["macro avg", *macro, total])
    rows.append(["micro avg", *(float(v) for v in micro), total])
    return rows


def _ratio(num: np.ndarray | float, den: np.ndarray | float) -> np.ndarray:
    """num / den, 0 where den is 0."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def markdown_table(rows: list[list[Any]], columns: list[str] = COLUMNS) -> str:
    """The rows as a Markdown table: the first column left-aligned, the others right; floats with 4 decimals."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(["---", *["---:"] * (len(columns) - 1)]) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(map(_cell, row)) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    """A Markdown cell: a float with 4 decimals, anything else as text with `|` escaped."""
    return f"{value:.4f}" if isinstance(value, float) else str(value).replace("|", "\\|")


def write_table(
    run_dir: str | Path,
    stem: str,
    columns: list[str],
    rows: list[list[Any]],
    logger: WandbLogger | None = None,
    key: str | None = None,
    step: int = 0,
) -> dict[str, Path]:
    """Write RUN_DIR/reports/{stem}.csv and {stem}.md, and log the table to W&B under `key` (default: stem).

    Returns {"csv": path, "md": path}.
    """
    out = Path(run_dir) / "reports"
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{stem}.csv", "md": out / f"{stem}.md"}
    with paths["csv"].open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([columns, *rows])
    paths["md"].write_text(markdown_table(rows, columns), encoding="utf-8")
    if logger is not None:
        logger.log_table(key=key or stem, columns=columns, data=rows, step=step)
    return paths


def write_reports(
    run_dir: str | Path,
    stage: str,
    confusion: np.ndarray,
    labels: list[str],
    logger: WandbLogger | None = None,
    step: int = 0,
) -> dict[str, Path]:
    """Write RUN_DIR/reports/{stage}_per_class.csv/.md and {stage}_confusion.csv/.png, and log them to W&B.

    W&B gets the per-class table as `{stage}/per_class` and the picture as `{stage}/confusion`.
    """
    out = Path(run_dir) / "reports"
    table = write_table(
        run_dir, f"{stage}_per_class", COLUMNS, per_class_rows(confusion, labels), logger, f"{stage}/per_class", step
    )
    paths = {
        "per_class_csv": table["csv"],
        "per_class_md": table["md"],
        "confusion_csv": out / f"{stage}_confusion.csv",
        "confusion_png": out / f"{stage}_confusion.png",
    }
    with paths["confusion_csv"].open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["true \\ predicted", *labels])
        writer.writerows([name, *map(int, row)] for name, row in zip(labels, np.asarray(confusion), strict=True))
    confusion_matrix_png(confusion, labels, paths["confusion_png"], title=f"{stage} confusion matrix")
    if logger is not None:
        logger.log_image(key=f"{stage}/confusion", images=[str(paths["confusion_png"])], step=step)
    log.info("%s reports written to %s", stage, out)
    return paths
