"""Pictures of a run (confusion matrices, ...), drawn with matplotlib's Agg backend: files, never windows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

ANNOTATE_UP_TO = 30  # write the count in each cell when there are at most this many labels


def confusion_matrix_png(matrix: np.ndarray, labels: list[str], path: str | Path, title: str = "") -> Path:
    """Draw a (true, predicted) count matrix as a PNG, rows normalised for colour, counts in the cells."""
    counts = np.asarray(matrix)  # (C, C)
    totals = counts.sum(axis=1, keepdims=True)
    shares = np.divide(counts, totals, out=np.zeros(counts.shape, dtype=float), where=totals > 0)
    side = min(4.0 + 0.35 * len(labels), 30.0)
    figure = Figure(figsize=(side, side * 0.85), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    figure.colorbar(image, ax=ax, label="share of the true label", shrink=0.8)
    ticks = np.arange(len(labels))
    ax.set_xticks(ticks, labels, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(ticks, labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    if len(labels) <= ANNOTATE_UP_TO:
        for (row, col), count in np.ndenumerate(counts):
            colour = "white" if shares[row, col] > 0.5 else "black"
            ax.text(col, row, str(int(count)), ha="center", va="center", color=colour, fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100)
    return path
