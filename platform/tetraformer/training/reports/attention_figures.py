"""Pictures of attention (matplotlib Agg, files only): image rollouts over patches, token-by-token heat maps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tetraformer.training.reports.plots import save_png

OVERLAY_ALPHA = 0.55  # opacity of a map drawn over its image
HEAT_MAP = "inferno"


def image_attention_figure(
    display: np.ndarray,
    cls_attention_per_head: np.ndarray,
    rollout: np.ndarray,
    path: str | Path,
    title: str = "",
    head_ids: Sequence[int] | None = None,
) -> Path:
    """PNG: the image, the last layer's [CLS] attention per head over the patches, the rollout on the image.

    display (C, H, W) uint8; cls_attention_per_head (heads, gh, gw) with its head numbers in `head_ids` order;
    rollout (gh, gw), upsampled (bilinear) to the image's size when drawn over it.
    """
    heads = cls_attention_per_head.shape[0]
    head_ids = list(head_ids) if head_ids is not None else list(range(heads))
    figure = _figure(1, heads + 2, 2.4)
    axes = figure.subplots(1, heads + 2, squeeze=False)[0]
    _show_image(axes[0], display, "image")
    for head, ax in enumerate(axes[1 : 1 + heads]):
        ax.imshow(cls_attention_per_head[head], cmap=HEAT_MAP)
        _bare(ax, f"[CLS] head {head_ids[head]}")
    _overlay(axes[-1], display, rollout, "rollout")
    figure.suptitle(title)
    return save_png(figure, path)


def rollout_grid_figure(displays: np.ndarray, rollouts: np.ndarray, path: str | Path, title: str = "") -> Path:
    """PNG: one row per image, the image beside its attention rollout overlay; displays (n, C, H, W) uint8."""
    n = displays.shape[0]
    figure = _figure(n, 2, 2.0)
    axes = figure.subplots(n, 2, squeeze=False)
    for row in range(n):
        _show_image(axes[row, 0], displays[row], "")
        _overlay(axes[row, 1], displays[row], rollouts[row], "")
    axes[0, 0].set_title("image")
    axes[0, 1].set_title("rollout")
    figure.suptitle(title)
    return save_png(figure, path)


def text_attention_figure(
    tokens: Sequence[str],
    weights: np.ndarray,
    row_tokens: Sequence[str],
    title: str,
    path: str | Path,
    head_ids: Sequence[int] | None = None,
    note: str = "",
) -> Path:
    """PNG grid of per-head heat maps: weights (H, T, S) of T query `row_tokens` over S key `tokens`."""
    heads, t, s = weights.shape
    head_ids = list(head_ids) if head_ids is not None else list(range(heads))
    cols = min(heads, 2 if max(t, s) > 20 else 4)
    rows = math.ceil(heads / cols)
    cell = min(max(0.16 * max(t, s) + 1.2, 2.6), 8.0)  # inches per heat map: room for the token labels
    figure = _figure(rows, cols, cell)
    axes = figure.subplots(rows, cols, squeeze=False).ravel()
    font = 8 if max(t, s) <= 24 else 6
    for index, ax in enumerate(axes):
        if index >= heads:
            ax.set_axis_off()
            continue
        image = ax.imshow(weights[index], cmap=HEAT_MAP, vmin=0.0, aspect="auto")
        ax.set_xticks(np.arange(s), list(tokens), rotation=90, fontsize=font)
        ax.set_yticks(np.arange(t), list(row_tokens), fontsize=font)
        ax.set_title(f"head {head_ids[index]}", fontsize=9)
        ax.set_xlabel("attended to (keys)", fontsize=8)
        ax.set_ylabel("attending (queries)", fontsize=8)
        figure.colorbar(image, ax=ax, shrink=0.7)
    figure.suptitle(f"{title}\n{note}" if note else title, fontsize=10)
    return save_png(figure, path)


def _figure(rows: int, cols: int, cell: float) -> Figure:
    """An Agg-backed figure of rows x cols cells of `cell` inches."""
    figure = Figure(figsize=(cols * cell, rows * cell + 0.6), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _show_image(ax: Axes, display: np.ndarray, title: str) -> None:
    """Draw a (C, H, W) uint8 image (grey when C is 1)."""
    picture = np.asarray(display).transpose(1, 2, 0)  # (H, W, C)
    if picture.shape[-1] == 1:
        ax.imshow(picture[..., 0], cmap="gray", vmin=0, vmax=255)
    else:
        ax.imshow(picture[..., :3])
    _bare(ax, title)


def _overlay(ax: Axes, display: np.ndarray, attention: np.ndarray, title: str) -> None:
    """The image with a (gh, gw) map stretched over it (bilinear) in translucent colour."""
    _show_image(ax, display, title)
    h, w = np.asarray(display).shape[-2:]
    ax.imshow(
        attention, cmap=HEAT_MAP, alpha=OVERLAY_ALPHA, extent=(-0.5, w - 0.5, h - 0.5, -0.5), interpolation="bilinear"
    )


def _bare(ax: Axes, title: str) -> None:
    """No ticks; a small title."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)
