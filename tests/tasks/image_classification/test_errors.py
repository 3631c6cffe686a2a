"""Bad input: one `error:` line naming the file (and CSV row), exit code 2; or skipped and counted. The data module
refuses (or skips) the files when a fit sets it up; one row goes through the CLI end to end."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tasks.image_classification.data import ImageClassificationData
from tests.data.quadrant_images import SIZE, write_folder, write_table
from tests.tasks.image_classification.conftest import tiny_config
from tetraformer.errors import TetraformerError


def datamodule(tmp_path: Path, **data: Any) -> ImageClassificationData:
    """The data module of the tiny test config over these files, as the CLI builds it (image size from the arch)."""
    return ImageClassificationData(model_image_size=SIZE, **tiny_config(tmp_path / "run", **data)["data"]["init_args"])


def refused(tmp_path: Path, **data: Any) -> str:
    """The line `tetraformer fit` prints for files its data refuses when set up (main prints these errors)."""
    with pytest.raises((TetraformerError, FileNotFoundError)) as err:
        datamodule(tmp_path, **data).setup("fit")
    return f"error: {err.value}"


def broken_png(path: Path) -> Path:
    """A PNG cut in half."""
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])
    return path


def test_csv_row_with_missing_file_ends_the_fit(
    run_cli: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI: the CSV's path and line, and the image path it resolved, as the last stderr line, exit 2."""
    table = write_table(tmp_path / "rows.csv", 16, 0)
    (tmp_path / "images" / "0-2.png").unlink()
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", "--trainer.max_steps", "1", train_path=str(table))
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == f"error: {table}:4: image file not found: {tmp_path / 'images' / '0-2.png'}"


def test_csv_row_with_missing_file(tmp_path: Path) -> None:
    """The CSV's path and line, and the image path it resolved."""
    table = write_table(tmp_path / "rows.csv", 16, 0)
    (tmp_path / "images" / "0-2.png").unlink()
    line = refused(tmp_path, train_path=str(table))
    assert line == f"error: {table}:4: image file not found: {tmp_path / 'images' / '0-2.png'}"


def test_unreadable_image_names_its_path(tmp_path: Path) -> None:
    """Bytes that are no image: the file's path and Pillow's reason."""
    root = write_folder(tmp_path / "train", 16, 0)
    bad = root / "top_left" / "junk.png"
    bad.write_text("not an image")
    line = refused(tmp_path, train_path=str(root))
    assert line.startswith(f"error: {bad}: cannot read image: cannot identify image file")


def test_truncated_image_names_its_path(tmp_path: Path) -> None:
    """A truncated PNG: its path, and that it cannot be read."""
    root = write_folder(tmp_path / "train", 16, 0)
    bad = broken_png(next((root / "bottom_left").glob("*.png")))
    assert refused(tmp_path, train_path=str(root)).startswith(f"error: {bad}: cannot read image: ")


def test_truncated_image_in_csv_names_row_and_image(tmp_path: Path) -> None:
    """A bad image a CSV row names: the CSV's path and line, then the image's."""
    table = write_table(tmp_path / "rows.jsonl", 16, 0)
    bad = broken_png(tmp_path / "images" / "0-5.png")
    assert refused(tmp_path, train_path=str(table)).startswith(f"error: {table}:6: {bad}: cannot read image")


def test_unknown_label_at_validation_lists_known(tmp_path: Path) -> None:
    """A validation class the training data lacks: its folder, the label and the known labels."""
    train = write_folder(tmp_path / "train", 16, 0)
    val = write_folder(tmp_path / "val", 8, 1)
    (val / "top_left").rename(val / "middle")
    line = refused(tmp_path, train_path=str(train), val_path=str(val))
    assert line == (
        f"error: {val / 'middle'}: unknown label 'middle'; known labels: 'bottom_left', 'bottom_right', "
        "'top_left', 'top_right'"
    )


def test_empty_class_folder(tmp_path: Path) -> None:
    """A class folder without images names the folder."""
    root = write_folder(tmp_path / "train", 16, 0)
    (root / "nothing").mkdir()
    (root / "nothing" / "notes.txt").write_text("no images here")
    assert refused(tmp_path, train_path=str(root)).startswith(f"error: {root / 'nothing'}: class folder has no images")


def test_channels_that_cannot_be_converted(tmp_path: Path) -> None:
    """Five channels per image cannot become gray or RGB: the archive's path and the count."""
    path = tmp_path / "five.npz"
    np.savez(path, x=np.zeros((8, 16, 16, 5), dtype=np.uint8), y=np.arange(8) % 2)
    line = refused(tmp_path, train_path=str(path))
    assert line == f"error: {path}: images have 5 channels; cannot convert them to 1 (expected 1, 2, 3 or 4)"


def test_skip_bad_images_counts_and_trains(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """With --data.skip_bad_images: bad images, missing files and empty class folders are left out, one line
    each; every image kept makes a training or validation batch."""
    table = write_table(tmp_path / "rows.csv", 24, 0)
    (tmp_path / "images" / "0-2.png").unlink()
    broken_png(tmp_path / "images" / "0-7.png")
    (tmp_path / "images" / "0-9.png").write_text("junk")
    data = datamodule(tmp_path, train_path=str(table), skip_bad_images=True)
    with caplog.at_level(logging.WARNING):
        data.setup("fit")
    messages = [r.getMessage() for r in caplog.records]
    assert any("skipped 1 rows whose image file is missing" in m for m in messages)
    assert any(m.startswith("skipped 2 of 23 images that could not be read") for m in messages)
    batches = [*data.train_dataloader(), *data.val_dataloader()]
    assert sum(len(batch["pixels"]) for batch in batches) == 21
    assert all(batch["pixels"].shape[1:] == (1, SIZE, SIZE) for batch in batches)
