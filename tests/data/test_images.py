"""Decoding: mode conversion to 1 or 3 channels, resizing, normalisation, and the decoded-image cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.data.quadrant_images import SIZE, write_folder
from tetraformer.data import images as images_module
from tetraformer.data.image_sources import CACHE_FOLDER, Reading, read_source
from tetraformer.data.images import Normalization, decode_image


def save(path: Path, image: Image.Image) -> Path:
    """Save and return the path."""
    image.save(path)
    return path


def test_modes_convert_to_gray_and_rgb(tmp_path: Path) -> None:
    """L, RGB, RGBA, palette and 16-bit images become (1 or 3, S, S) uint8 with the expected values."""
    gray = np.full((4, 4), 200, dtype=np.uint8)
    rgb = np.zeros((4, 4, 3), dtype=np.uint8)
    rgb[..., 0] = 255  # pure red
    files = {
        "l": save(tmp_path / "l.png", Image.fromarray(gray, mode="L")),
        "rgb": save(tmp_path / "rgb.png", Image.fromarray(rgb, mode="RGB")),
        "rgba": save(
            tmp_path / "rgba.png",
            Image.fromarray(np.dstack([rgb, np.full((4, 4), 9, np.uint8)]), mode="RGBA"),
        ),
        "p": save(tmp_path / "p.png", Image.fromarray(rgb, mode="RGB").convert("P")),
        "i16": save(tmp_path / "i16.png", Image.fromarray(np.full((4, 4), 65535, dtype=np.uint16))),
    }
    assert torch.equal(decode_image(files["l"], 3, 4), torch.full((3, 4, 4), 200, dtype=torch.uint8))
    for name in ("rgb", "rgba", "p"):
        as_rgb, as_gray = decode_image(files[name], 3, 4), decode_image(files[name], 1, 4)
        assert as_rgb.shape == (3, 4, 4) and as_rgb[0].min() >= 250 and as_rgb[1:].max() <= 5, name
        assert as_gray.shape == (1, 4, 4) and abs(int(as_gray[0, 0, 0]) - 76) <= 1, name  # 0.299 * 255
    assert torch.equal(decode_image(files["i16"], 1, 4), torch.full((1, 4, 4), 255, dtype=torch.uint8))
    assert decode_image(files["rgb"], 3, 8).shape == (3, 8, 8)


def test_normalization_statistics() -> None:
    """Mean and std per channel over the training images; normalised training pixels have mean 0, std 1."""
    images = torch.randint(0, 256, (50, 3, 6, 6), dtype=torch.uint8)
    norm = Normalization.of(images, chunk=7)
    out = norm(images)  # (N, 3, 6, 6)
    assert torch.allclose(out.mean((0, 2, 3)), torch.zeros(3), atol=1e-4)
    assert torch.allclose(out.std((0, 2, 3), unbiased=False), torch.ones(3), atol=1e-3)


def count_decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each decode_image call."""
    calls: list[str] = []
    real = images_module.decode_image

    def counting(path: str, channels: int, size: int) -> torch.Tensor:
        calls.append(str(path))
        return real(path, channels, size)

    monkeypatch.setattr(images_module, "decode_image", counting)
    return calls


def test_cache_is_reused_and_invalidated_when_a_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Second read: no decoding, same tensor. A rewritten file changes the key: that split is decoded
    again."""
    root = write_folder(tmp_path / "train", 12, 0)
    calls = count_decodes(monkeypatch)
    reading = Reading(channels=1, size=SIZE, cache_dir=None)
    first = read_source(str(root), reading, labelled=True)
    assert len(calls) == 12 and len(list((tmp_path / CACHE_FOLDER).glob("*.pt"))) == 1
    second = read_source(str(root), reading, labelled=True)
    assert len(calls) == 12 and torch.equal(first.images, second.images) and first.labels == second.labels
    changed = Path(first.paths[4])
    Image.fromarray(np.zeros((SIZE, SIZE), dtype=np.uint8), mode="L").save(changed)
    third = read_source(str(root), reading, labelled=True)
    assert len(calls) == 24 and int(third.images[4].max()) == 0
    read_source(str(root), Reading(channels=3, size=SIZE, cache_dir=None), labelled=True)  # other settings: new key
    assert len(calls) == 36
    read_source(str(root), Reading(channels=1, size=SIZE, cache_dir=None, cache=False), labelled=True)
    assert len(calls) == 48
