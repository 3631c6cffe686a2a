"""Fixtures for image classification: the quadrant fixture as train/val/test folders; a tiny ViT config; the
module-scoped reference run whose artifacts carry the properties of an ordinary fit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.cli_runner import config_runner, tiny_run_config
from tests.data.quadrant_images import SIZE, write_folder
from tetraformer.cli import main

# At lr 1e-3 every seed measured (12 of 12) reaches val/acc 1.0 by epoch 11 and stays there; at 5e-3 for 8 epochs
# 3 of 5 ended at 0.5-0.73 (the class of a quadrant depends on learning positions, which a higher rate unsettles).
EPOCHS, LR = 16, 1e-3


def tiny_config(root: Path, model: dict | None = None, **data: object) -> dict:
    """A tiny ViT (d_model 32, patch 4 on 16x16 gray images) that learns the quadrant fixture in seconds."""
    arch = {"d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "image_size": SIZE, "patch_size": 4, "dropout": 0.0}
    return tiny_run_config(
        root,
        "tasks.image_classification.module.ImageClassification",
        "tasks.image_classification.data.ImageClassificationData",
        {
            "arch": arch,
            "optim": {"lr": LR, "warmup_steps": 10, "schedule": "constant", "weight_decay": 0.0},
            "attention_images": 0,
            **(model or {}),
        },
        {"channels": 1, "batch_size": 16, **data},
        max_epochs=EPOCHS,
    )


def quadrant_folders(root: Path) -> dict[str, Path]:
    """train / val / test class folders of the quadrant fixture (160 / 40 / 40 images) under `root`."""
    return {
        name: write_folder(root / name, n, seed)
        for name, n, seed in (("train", 160, 0), ("val", 40, 1), ("test", 40, 2))
    }


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    """train / val / test class folders of the quadrant fixture."""
    return quadrant_folders(tmp_path / "data")


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config (model and data overrides) and run `tetraformer SUBCOMMAND -c it ARGS...`."""
    return config_runner(tmp_path, monkeypatch, tiny_config)


# The reference run: 2 epochs of 10 steps, each validated (attention maps drawn), not to a learning threshold
REFERENCE_EPOCHS = 2


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The reference run, once per test file: REFERENCE_EPOCHS epochs on class folders (train / val) with attention
    maps of 2 validation images; its run dir ("run"), a scratch folder ("tmp") and the data folders."""
    tmp = tmp_path_factory.mktemp("image-reference")
    data = quadrant_folders(tmp / "data")
    config = tiny_config(tmp / "run", {"attention_images": 2}, train_path=str(data["train"]), val_path=str(data["val"]))
    config["trainer"]["max_epochs"] = REFERENCE_EPOCHS
    (tmp / "fit.yaml").write_text(yaml.safe_dump(config))
    main(["fit", "-c", str(tmp / "fit.yaml")])
    return {"run": tmp / "run", "tmp": tmp, **data}
