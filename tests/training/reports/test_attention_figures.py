"""Attention pictures: valid PNGs whose size follows the heads and tokens drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from tetraformer.training.reports.attention_figures import (
    image_attention_figure,
    rollout_grid_figure,
    text_attention_figure,
)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a file PIL reads as a PNG."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        image.load()
        return image.size


def stochastic(*shape: int) -> np.ndarray:
    """Random rows that sum to one."""
    weights = np.random.default_rng(0).random(shape)
    return weights / weights.sum(-1, keepdims=True)


def test_image_figure_grey_and_colour_one_panel_per_head(tmp_path: Path) -> None:
    grey = np.zeros((1, 16, 16), dtype=np.uint8)
    colour = np.full((3, 16, 16), 200, dtype=np.uint8)
    two = image_attention_figure(grey, stochastic(2, 4, 4), stochastic(4, 4), tmp_path / "a" / "two.png")
    four = image_attention_figure(
        colour, stochastic(4, 4, 4), stochastic(4, 4), tmp_path / "four.png", "t", [0, 1, 2, 5]
    )
    assert png_size(four)[0] > png_size(two)[0] > 0


def test_rollout_grid_has_a_row_per_image(tmp_path: Path) -> None:
    displays = np.zeros((3, 1, 16, 16), dtype=np.uint8)
    one = rollout_grid_figure(displays[:1], stochastic(1, 4, 4), tmp_path / "one.png")
    three = rollout_grid_figure(displays, stochastic(3, 4, 4), tmp_path / "three.png")
    assert png_size(three)[1] > png_size(one)[1]


def test_text_figure_cross_attention_rows_and_columns_differ(tmp_path: Path) -> None:
    keys, queries = [f"src{i}" for i in range(7)], ["<s>", "a", "b"]
    path = text_attention_figure(keys, stochastic(3, 3, 7), queries, "cross", tmp_path / "cross.png", note="n")
    width, height = png_size(path)
    assert width > 0 and height > 0


def test_text_figure_grows_with_the_tokens(tmp_path: Path) -> None:
    short = [f"t{i}" for i in range(6)]
    long = [f"t{i}" for i in range(40)]
    small = text_attention_figure(short, stochastic(2, 6, 6), short, "self", tmp_path / "small.png")
    large = text_attention_figure(long, stochastic(2, 40, 40), long, "self", tmp_path / "large.png")
    assert png_size(large)[1] > png_size(small)[1]
