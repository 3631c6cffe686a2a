"""Each source gives the same images and labels: class folders, CSV and JSONL with relative paths, npz
arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.data.quadrant_images import (
    QUADRANTS,
    SIZE,
    quadrant_images,
    write_folder,
    write_npz,
    write_table,
)
from tetraformer.data import LabelVocabulary
from tetraformer.data.image_sources import ImageSet, Reading, read_source


def reading(**options: object) -> Reading:
    """Gray images at the fixture's size, cached next to the data."""
    return Reading(**{"channels": 1, "size": SIZE, "cache_dir": None, **options})


def by_label(images: ImageSet) -> dict[str, list[bytes]]:
    """Each label's images as bytes, sorted (the sources order files differently)."""
    out: dict[str, list[bytes]] = {}
    for image, label in zip(images.images, images.labels, strict=True):
        out.setdefault(label, []).append(image.numpy().tobytes())
    return {k: sorted(v) for k, v in out.items()}


def test_folders_csv_jsonl_and_npz_agree(tmp_path: Path) -> None:
    """The same 12 fixture images read from a folder tree, a CSV, a JSONL and an npz: same pixels, same
    labels."""
    expected_x, expected_labels = quadrant_images(12, 5)
    sources = [
        write_folder(tmp_path / "folder", 12, 5),
        write_table(tmp_path / "csv" / "rows.csv", 12, 5),
        write_table(tmp_path / "jsonl" / "rows.jsonl", 12, 5),
        write_npz(tmp_path / "arrays.npz", 12, 5),
    ]
    read = [read_source(str(s), reading(), labelled=True) for s in sources]
    for images in read:
        assert images.images.shape == (12, 1, SIZE, SIZE) and images.images.dtype == torch.uint8
        assert sorted(images.labels) == sorted(expected_labels)
        assert by_label(images) == by_label(read[-1])
    assert torch.equal(read[-1].images[:, 0], torch.from_numpy(expected_x))  # npz keeps its order


def test_csv_paths_resolve_against_the_csv_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative paths in a CSV are relative to the CSV, not to the working directory."""
    table = write_table(tmp_path / "deep" / "rows.csv", 4, 0)
    monkeypatch.chdir(tmp_path)
    images = read_source(str(table), reading(), labelled=True)
    assert images.paths == [str(tmp_path / "deep" / "images" / f"0-{i}.png") for i in range(4)]


def test_npz_layouts_and_float_pixels(tmp_path: Path) -> None:
    """(N, H, W, C) and (N, C, H, W), uint8 or 0..1 floats, give the same RGB images; int labels become
    names."""
    rgb = np.random.default_rng(0).integers(0, 256, size=(3, 8, 8, 3), dtype=np.uint8)
    variants = {"nhwc": rgb, "nchw": rgb.transpose(0, 3, 1, 2), "float": rgb.astype(np.float32) / 255.0}
    read = {}
    for name, x in variants.items():
        np.savez(tmp_path / f"{name}.npz", x=x, y=np.array([0, 1, 1]))
        read[name] = read_source(str(tmp_path / f"{name}.npz"), reading(channels=3, size=8), labelled=True)
    assert torch.equal(read["nhwc"].images, torch.from_numpy(rgb).permute(0, 3, 1, 2))
    assert torch.equal(read["nchw"].images, read["nhwc"].images) and torch.equal(
        read["float"].images, read["nhwc"].images
    )
    assert read["nhwc"].labels == ["0", "1", "1"]


def test_unlabelled_folder_and_single_image_for_predict(tmp_path: Path) -> None:
    """To predict, a folder gives every image under it (class folders or not) and a file gives itself."""
    root = write_folder(tmp_path / "f", 8, 0)
    images = read_source(str(root), reading(), labelled=False)
    assert len(images) == 8 and images.labels is None
    one = read_source(images.paths[3], reading(), labelled=False)
    assert torch.equal(one.images[0], images.images[3])


def test_resize_to_the_model_size_and_batches(tmp_path: Path) -> None:
    """Images are resized to `size`; a batch is one indexed tensor with labels encoded by the vocabulary."""
    images = read_source(str(write_folder(tmp_path / "f", 8, 0)), reading(size=8), labelled=True)
    images.encode(LabelVocabulary(QUADRANTS))
    batch = images.__getitems__([0, 5, 2])
    assert batch["pixels"].shape == (3, 1, 8, 8)
    assert [QUADRANTS[i] for i in batch["labels"]] == [images.labels[i] for i in (0, 5, 2)]
    assert batch["paths"] == [images.paths[i] for i in (0, 5, 2)]
