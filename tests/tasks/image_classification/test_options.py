"""Options end to end: mixing with soft targets, 2D sin-cos positions, mean pooling, given mean/std, RGB."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.cli_runner import last_metrics
from tests.tasks.image_classification.conftest import LR
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


def test_max_tokens_in_patches_sizes_the_decay(run_cli: Callable[..., Path], folders: dict[str, Path]) -> None:
    """Every 16x16 image is [CLS] + 16 patches of 4: `--run.max_tokens 1000` at 16 images (272 tokens) a step is
    4 steps, and the cosine rate ends on the fourth at min_lr_ratio x lr."""
    schedule = ["--model.optim.schedule", "cosine", "--model.optim.warmup_steps", "1", "--run.max_tokens", "1000"]
    run = run_cli("fit", *schedule, train_path=str(folders["train"]), val_path=str(folders["val"]))
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 4 and ckpt["callbacks"]["Throughput"]["tokens_seen"] == 4 * 16 * 17
    assert ckpt["optimizer_states"][0]["param_groups"][0]["lr"] == pytest.approx(LR * 0.1)
