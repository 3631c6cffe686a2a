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
    return save_png(figure, path)


def curves_png(
    curves: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]],
    path: str | Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
) -> Path:
    """Draw one colour per name: for each of its (x, y, band) lines a line, and a shaded y ± band when given."""
    figure = Figure(figsize=(7.0, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    for number, (name, lines) in enumerate(curves.items()):
        colour = f"C{number % 10}"  # matplotlib's default colour cycle
        for index, (x, y, band) in enumerate(lines):
            ax.plot(x, y, color=colour, marker=".", label=name if index == 0 else None)
            if band is not None:
                ax.fill_between(x, y - band, y + band, color=colour, alpha=0.2, linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if curves:
        ax.legend()
    return save_png(figure, path)


def bars_png(
    names: list[str], means: list[float], errors: list[float], path: str | Path, ylabel: str, title: str = ""
) -> Path:
    """Draw one bar per name at its mean with an error bar (e.g. the standard deviation over seeds)."""
    figure = Figure(figsize=(max(4.0, 1.0 + 0.9 * len(names)), 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    positions = np.arange(len(names))
    ax.bar(positions, means, yerr=errors, capsize=4, color="tab:blue", alpha=0.8)
    ax.set_xticks(positions, names, rotation=30 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return save_png(figure, path)


def save_png(figure: Figure, path: str | Path) -> Path:
    """Write a figure as PNG (parent folders created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100)
    return path
