"""End to end through the CLI, on the reference run (conftest `trained_run`): what a fit writes, then test,
predict, `attention` and `convert to-hf` from its checkpoint alone (learning thresholds: test_learning.py)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from PIL import Image

from tests.cli_runner import last_metrics
from tests.data.quadrant_images import QUADRANTS
from tests.tasks.image_classification.conftest import REFERENCE_EPOCHS
from tetraformer.cli import main
from tetraformer.training.checkpointing.loading import load_task_module


def evaluate(trained: dict[str, Path], stage: str, out: Path, *args: str) -> None:
    """`tetraformer STAGE --ckpt_path` the reference run's last checkpoint on its test folder, into `out`."""
    ckpt = str(trained["run"] / "checkpoints" / "last.ckpt")
    data = ["--data.test_path" if stage == "test" else "--data.predict_path", str(trained["test"])]
    main([stage, "--ckpt_path", ckpt, *data, *args, "--run.wandb", "disabled", "--trainer.default_root_dir", str(out)])


def test_fit_logs_metrics_and_attention_maps(trained_run: dict[str, Path]) -> None:
    """Validation logs accuracy and macro F1; with 4 classes top-5 is not reported (it would be 1); attention
    rollout maps are drawn at each validation."""
    metrics = last_metrics(trained_run["run"])
    assert 0.0 <= metrics["val/acc"] <= 1.0 and 0.0 <= metrics["val/f1_macro"] <= 1.0
    assert "val/top5_acc" not in metrics
    assert len(list((trained_run["run"] / "attention").glob("*.png"))) == REFERENCE_EPOCHS


def test_test_from_checkpoint_alone_writes_reports(trained_run: dict[str, Path]) -> None:
    """`test --ckpt_path` with only a test folder: accuracy, per-class report and confusion-matrix PNG."""
    out = trained_run["tmp"] / "test"
    evaluate(trained_run, "test", out)
    assert 0.0 <= last_metrics(out, "test")["test/acc"] <= 1.0
    pngs = list(out.rglob("*.png"))
    assert any("confusion" in p.name and "test" in p.name for p in pngs)
    assert any("test" in p.name and p.suffix == ".md" for p in out.rglob("*.md"))


def test_predict_from_checkpoint_alone(trained_run: dict[str, Path]) -> None:
    """Predictions: each image's path, a known label (the most probable) and --model.top_k probabilities."""
    out = trained_run["tmp"] / "predict"
    evaluate(trained_run, "predict", out, "--model.top_k", "2")
    rows = [json.loads(line) for line in (out / "eval" / "predict-1" / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 40 and all(Path(r["path"]).is_file() for r in rows)
    for row in rows:
        assert row["predicted"] in QUADRANTS and len(row["probabilities"]) == 2
        assert row["predicted"] == max(row["probabilities"], key=row["probabilities"].get)


def test_image_inputs_from_checkpoint(trained_run: dict[str, Path]) -> None:
    """A module restored from the checkpoint alone reads one image file as it was trained: stored size and
    stats; its logits name one of the labels."""
    module = load_task_module(trained_run["run"] / "checkpoints" / "last.ckpt")
    image = next((trained_run["test"] / "top_left").glob("*.png"))
    display, pixels = module.image_inputs(image)
    assert display.shape == (1, 16, 16) and pixels.shape == (1, 1, 16, 16)
    assert module.vocabulary.names[int(module.net(pixels).argmax())] in QUADRANTS


def test_attention_command_draws_an_image_of_the_checkpoint(trained_run: dict[str, Path]) -> None:
    """`tetraformer attention --image` on this task's checkpoint writes a PNG (through `image_inputs`)."""
    out = trained_run["tmp"] / "attention.png"
    image = next((trained_run["test"] / "bottom_right").glob("*.png"))
    ckpt = str(trained_run["run"] / "checkpoints" / "last.ckpt")
    main(["attention", "--ckpt", ckpt, "--image", str(image), "--output", str(out)])
    with Image.open(out) as picture:
        assert picture.format == "PNG" and picture.width > 100


def test_convert_to_hf_vit_with_labels(trained_run: dict[str, Path]) -> None:
    """`convert to-hf` of this task's checkpoint: transformers' ViTForImageClassification gives our logits and
    names the classes with the label vocabulary."""
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    out = trained_run["tmp"] / "hf"
    main(["convert", "to-hf", str(ckpt), str(out)])
    hf = transformers.ViTForImageClassification.from_pretrained(out).eval()
    module = load_task_module(ckpt)
    _, pixels = module.image_inputs(next((trained_run["test"] / "top_right").glob("*.png")))
    with torch.no_grad():
        assert torch.allclose(hf(pixel_values=pixels).logits, module.net(pixels), atol=1e-4)
    assert [hf.config.id2label[i] for i in range(4)] == list(QUADRANTS)
