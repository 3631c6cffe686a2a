"""Options end to end, on one fit that sets them all: mixing with soft targets, 2D sin-cos positions, mean pooling,
given mean/std, RGB, and a token budget (`--run.max_tokens`) that sizes a cosine decay."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.cli_runner import last_metrics
from tests.option_refusals import Refusals
from tests.tasks.image_classification.conftest import LR, quadrant_folders, tiny_config
from tetraformer.cli import main
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module

OPTIONS = ["--model.pooling", "mean", "--model.arch.position", "sinusoidal"]
AUGMENTATION = dict(
    mixup_alpha=0.4, cutmix_alpha=1.0, crop_padding=2, hflip=True, resized_crop_scale=0.5, erase_prob=0.25
)
SCHEDULE = ["--model.optim.schedule", "cosine", "--model.optim.warmup_steps", "1", "--run.max_tokens", "1000"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fit with every option of this file, read as RGB with given statistics; its run directory."""
    tmp = tmp_path_factory.mktemp("image-options")
    data = quadrant_folders(tmp / "data")
    stats = dict(channels=3, mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25])
    paths = dict(train_path=str(data["train"]), val_path=str(data["val"]))
    (tmp / "fit.yaml").write_text(yaml.safe_dump(tiny_config(tmp / "run", **paths, **AUGMENTATION, **stats)))
    main(["fit", "-c", str(tmp / "fit.yaml"), *OPTIONS, *SCHEDULE])
    return tmp / "run"


def test_mixing_sinusoidal_mean_pooling_and_given_statistics(trained: Path) -> None:
    """A few steps with mixup + cutmix, crops and flips on a mean-pooled sin-cos ViT, read as RGB; what the
    checkpoint keeps."""
    assert np.isfinite(last_metrics(trained, "train")["train/loss"])
    ckpt = trained / "checkpoints" / "last.ckpt"
    images = read_checkpoint(ckpt)[PAYLOAD_KEY]["data_spec"]["image"]
    assert images == {"size": 16, "channels": 3, "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}
    net = load_task_module(ckpt).net
    assert net.head.pooling == "mean" and net.cfg.position == "sinusoidal" and net.backbone.embed.positions is None


def test_max_tokens_in_patches_sizes_the_decay(trained: Path) -> None:
    """Every 16x16 image is [CLS] + 16 patches of 4: `--run.max_tokens 1000` at 16 images (272 tokens) a step is
    4 steps, and the cosine rate ends on the fourth at min_lr_ratio x lr."""
    ckpt = torch.load(trained / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 4 and ckpt["callbacks"]["Throughput"]["tokens_seen"] == 4 * 16 * 17
    assert ckpt["optimizer_states"][0]["param_groups"][0]["lr"] == pytest.approx(LR * 0.1)


def test_mean_and_std_need_one_value_per_channel(tmp_path: Path) -> None:
    """Three means for gray images: one line naming the option (what `fit` prints after `error: `, exit code 2)."""
    args = ["--data.mean", "[0.5,0.5,0.5]", "--data.std", "[0.2,0.2,0.2]"]
    line = Refusals(tmp_path).line("image_classification", args, "--data.mean")
    assert line == "--data.mean [0.5, 0.5, 0.5]: needs 1 value(s), one per channel"
