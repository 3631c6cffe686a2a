"""Image classification from a Parquet file with an Image column and a ClassLabel label."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from datasets import ClassLabel, Dataset, Features, Image

from tests.data.quadrant_images import QUADRANTS, quadrant_images
from tetraformer.training.checkpointing.loading import load_task_module

LABELS = ClassLabel(names=list(reversed(QUADRANTS)))  # not sorted: the vocabulary keeps the dataset's order


def quadrants(n: int, seed: int) -> Dataset:
    """The quadrant fixture as a dataset of PIL images (stored as PNG bytes) and ClassLabel ids."""
    from PIL import Image as PILImage

    x, labels = quadrant_images(n, seed)
    images = [PILImage.fromarray(image, mode="L") for image in x]
    features = Features({"img": Image(), "label": LABELS})
    return Dataset.from_dict({"img": images, "label": [LABELS.str2int(label) for label in labels]}, features)


@pytest.mark.slow
def test_fit_from_an_image_column(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """--data.image_field names the Image column; the label names come from the ClassLabel."""
    train, val = tmp_path / "train.parquet", tmp_path / "val.parquet"
    quadrants(32, 0).to_parquet(str(train))
    quadrants(8, 1).to_parquet(str(val))
    run = run_cli("fit", "--trainer.max_steps", "3", train_path=str(train), val_path=str(val), image_field="img")
    assert load_task_module(run / "checkpoints" / "last.ckpt").label_names() == LABELS.names
