"""A tiny ViT learns the quadrant fixture through the CLI; test and predict from its checkpoint alone reach the same
accuracy (learning lane; what these commands write is checked on the reference run, test_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.cli_runner import last_metrics
from tests.data.quadrant_images import QUADRANTS
from tests.tasks.image_classification.conftest import EPOCHS, quadrant_folders, tiny_config
from tetraformer.cli import main
from tetraformer.training.checkpointing.loading import load_task_module


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One fit on class folders (train / val), shared by this file's tests; its run dir and data folders."""
    tmp = tmp_path_factory.mktemp("learn")
    data = quadrant_folders(tmp / "data")
    config = tmp / "fit.yaml"
    options = tiny_config(
        tmp / "run", {"attention_images": 2}, train_path=str(data["train"]), val_path=str(data["val"])
    )
    config.write_text(yaml.safe_dump(options))
    main(["fit", "-c", str(config)])
    return {"run": tmp / "run", "tmp": tmp, **data}


@pytest.mark.learning
def test_tiny_vit_learns_quadrants(trained: dict[str, Path]) -> None:
    """Validation accuracy well above chance (0.25); with 4 classes top-5 is not reported (it would be 1)."""
    metrics = last_metrics(trained["run"])
    assert metrics["val/acc"] >= 0.85 and metrics["val/f1_macro"] >= 0.8
    assert "val/top5_acc" not in metrics
    assert len(list((trained["run"] / "attention").glob("*.png"))) == EPOCHS  # rollout maps at each validation


@pytest.mark.learning
def test_test_from_checkpoint_alone_writes_reports(trained: dict[str, Path]) -> None:
    """`test --ckpt_path` with only a test folder: accuracy, per-class report and confusion-matrix PNG."""
    out = trained["tmp"] / "test"
    main(
        [
            "test",
            "--ckpt_path",
            str(trained["run"] / "checkpoints" / "last.ckpt"),
            "--data.test_path",
            str(trained["test"]),
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(out),
        ]
    )
    assert last_metrics(out, "test")["test/acc"] >= 0.85
    pngs = list(out.rglob("*.png"))
    assert any("confusion" in p.name and "test" in p.name for p in pngs)
    assert any("test" in p.name and p.suffix == ".md" for p in out.rglob("*.md"))


@pytest.mark.learning
def test_predict_from_checkpoint_alone(trained: dict[str, Path]) -> None:
    """Predictions: each image's path, a known label (the most probable) and --model.top_k probabilities."""
    out = trained["tmp"] / "predict"
    main(
        [
            "predict",
            "--ckpt_path",
            str(trained["run"] / "checkpoints" / "last.ckpt"),
            "--data.predict_path",
            str(trained["test"]),
            "--model.top_k",
            "2",
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(out),
        ]
    )
    rows = [json.loads(line) for line in (out / "eval" / "predict-1" / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 40 and all(Path(r["path"]).is_file() for r in rows)
    for row in rows:
        assert row["predicted"] in QUADRANTS and len(row["probabilities"]) == 2
        assert row["predicted"] == max(row["probabilities"], key=row["probabilities"].get)
    right = np.mean([Path(r["path"]).parent.name == r["predicted"] for r in rows])
    assert right >= 0.85


@pytest.mark.learning
def test_image_inputs_from_checkpoint(trained: dict[str, Path]) -> None:
    """A module restored from the checkpoint alone reads one image file as it was trained: stored size and
    stats."""
    module = load_task_module(trained["run"] / "checkpoints" / "last.ckpt")
    image = next((trained["test"] / "top_left").glob("*.png"))
    display, pixels = module.image_inputs(image)
    assert display.shape == (1, 16, 16) and pixels.shape == (1, 1, 16, 16)
    assert module.vocabulary.names[int(module.net(pixels).argmax())] == "top_left"
