"""Options end to end: mixing with soft targets, 2D sin-cos positions, mean pooling, given mean/std, RGB."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.cli_runner import last_metrics
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module


def test_mixing_sinusoidal_mean_pooling_and_given_statistics(
    run_cli: Callable[..., Path], folders: dict[str, Path]
) -> None:
    """A few steps with mixup + cutmix, crops and flips on a mean-pooled sin-cos ViT, read as RGB; what the
    checkpoint keeps."""
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "4",
        "--model.pooling",
        "mean",
        "--model.arch.position",
        "sinusoidal",
        train_path=str(folders["train"]),
        val_path=str(folders["val"]),
        channels=3,
        mixup_alpha=0.4,
        cutmix_alpha=1.0,
        crop_padding=2,
        hflip=True,
        resized_crop_scale=0.5,
        erase_prob=0.25,
        mean=[0.5, 0.5, 0.5],
        std=[0.25, 0.25, 0.25],
    )
    assert np.isfinite(last_metrics(run, "train")["train/loss"])
    ckpt = run / "checkpoints" / "last.ckpt"
    images = read_checkpoint(ckpt)[PAYLOAD_KEY]["data_spec"]["image"]
    assert images == {"size": 16, "channels": 3, "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}
    net = load_task_module(ckpt).net
    assert net.head.pooling == "mean" and net.cfg.position == "sinusoidal" and net.backbone.embed.positions is None


def test_mean_and_std_need_one_value_per_channel(
    run_cli: Callable[..., Path], folders: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Three means for gray images: one error line, exit code 2."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", "--trainer.max_steps", "1", train_path=str(folders["train"]), mean=[0.5] * 3, std=[0.2] * 3)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --data.mean [0.5, 0.5, 0.5]: needs 1 value(s), one per channel"
    )
