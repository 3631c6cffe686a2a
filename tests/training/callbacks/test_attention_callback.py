"""AttentionRolloutImages: a PNG per validation under RUN_DIR/attention, logged to W&B, the model's mode kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lightning.pytorch.loggers import WandbLogger
from PIL import Image

from tests.training.image_task import IMAGE_ARCH, TinyImageTask, train_image_task
from tests.training.wandb_records import history_rows
from tetraformer.cli.app import finish_wandb
from tetraformer.core import TransformerConfig
from tetraformer.training.callbacks.attention_maps import rollout_maps


def test_a_png_per_validation_logged_to_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = WandbLogger(save_dir=str(tmp_path), project="attention", offline=True)
    train_image_task(tmp_path, logger=logger, steps=4)  # validations after steps 2 and 4; the sanity check draws none
    pictures = sorted((tmp_path / "attention").glob("*.png"))
    assert [p.name for p in pictures] == ["step_000002.png", "step_000004.png"]
    for picture in pictures:
        with Image.open(picture) as image:
            assert image.format == "PNG" and min(image.size) > 0
    finish_wandb(_Run(logger))
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    rows = [row for row in history_rows(run_file) if "val/attention_rollout/_type" in row]
    assert [row["trainer/global_step"] for row in rows] == [2, 4]
    assert {row["val/attention_rollout/format"] for row in rows} == {"png"}


class _Run:
    """What finish_wandb reads from a Trainer: its loggers."""

    def __init__(self, logger: WandbLogger) -> None:
        self.loggers = [logger]


def test_without_wandb_only_files(tmp_path: Path) -> None:
    train_image_task(tmp_path, logger=False, steps=2)
    assert len(list((tmp_path / "attention").glob("step_*.png"))) == 1


def test_rollout_maps_are_patch_distributions_and_keep_the_training_mode() -> None:
    task = TinyImageTask(TransformerConfig(**IMAGE_ARCH))
    net = task.make_network(task.arch).train()
    maps = rollout_maps(net, torch.randn(3, 1, 16, 16))  # (B, gh, gw)
    assert maps.shape == (3, 4, 4)
    assert net.training
    assert (maps > 0).all() and (maps.sum((1, 2)) < 1).all()  # [CLS] keeps a share on itself
