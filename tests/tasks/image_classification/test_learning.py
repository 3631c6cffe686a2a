"""A tiny ViT learns the quadrant fixture end to end through the CLI; test writes reports from the checkpoint alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.tasks.image_classification.conftest import last_metrics
from tetraformer.cli import main


def test_tiny_vit_learns_quadrants_and_tests_from_checkpoint(
    run_cli: Callable[..., Path], folders: dict[str, Path], tmp_path: Path
) -> None:
    """Validation accuracy well above chance (0.25); `test` from the checkpoint alone writes a confusion matrix."""
    run = run_cli("fit", train_path=str(folders["train"]), val_path=str(folders["val"]))
    assert last_metrics(run)["val/acc"] >= 0.85
    assert "val/top5_acc" not in last_metrics(run)  # 4 classes: top-5 would always be 1
    out = tmp_path / "test"
    main(["test", "--ckpt_path", str(run / "checkpoints" / "last.ckpt"), "--data.test_path", str(folders["test"]),
          "--run.wandb", "disabled", "--trainer.default_root_dir", str(out)])  # fmt: skip
    assert last_metrics(out, "test")["test/acc"] >= 0.85
    assert (out / "reports" / "test_confusion.png").is_file() or list(out.rglob("*confusion*.png"))
