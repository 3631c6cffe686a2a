"""The quadrant image fixture: gray noise with one bright quadrant, written as folders, CSV/JSONL or npz."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image

QUADRANTS = ("bottom_left", "bottom_right", "top_left", "top_right")  # sorted: the vocabulary's order
SIZE = 16


def quadrant_images(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """(n, SIZE, SIZE) uint8 noise with one bright quadrant; the label names the quadrant."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 90, size=(n, SIZE, SIZE), dtype=np.uint8)
    labels = []
    half = SIZE // 2
    for i in range(n):
        label = QUADRANTS[i % len(QUADRANTS)]
        rows = slice(0, half) if label.startswith("top") else slice(half, SIZE)
        cols = slice(0, half) if label.endswith("left") else slice(half, SIZE)
        x[i, rows, cols] += rng.integers(120, 160, dtype=np.uint8)
        labels.append(label)
    return x, labels


def write_folder(root: Path, n: int, seed: int) -> Path:
    """ROOT/<quadrant>/<i>.png grayscale images."""
    x, labels = quadrant_images(n, seed)
    for i, (image, label) in enumerate(zip(x, labels, strict=True)):
        (root / label).mkdir(parents=True, exist_ok=True)
        Image.fromarray(image, mode="L").save(root / label / f"{i:04d}.png")
    return root


def write_table(path: Path, n: int, seed: int) -> Path:
    """A CSV (or JSONL, by suffix) of relative image paths and labels, the images in path.parent/images/."""
    x, labels = quadrant_images(n, seed)
    (path.parent / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (image, label) in enumerate(zip(x, labels, strict=True)):
        Image.fromarray(image, mode="L").save(path.parent / "images" / f"{seed}-{i}.png")
        rows.append({"path": f"images/{seed}-{i}.png", "label": label})
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["path", "label"])
            writer.writeheader()
            writer.writerows(rows)
    return path


def write_npz(path: Path, n: int, seed: int) -> Path:
    """x (n, SIZE, SIZE) uint8 and y (n,) label strings."""
    x, labels = quadrant_images(n, seed)
    np.savez(path, x=x, y=np.array(labels))
    return path
