"""The label vocabulary survives the checkpoint; `predict` needs only the checkpoint and keeps other fields."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.tasks.text_classification.conftest import labelled_rows, write_jsonl
from tetraformer.cli import main
from tetraformer.training.checkpointing.loading import load_task_module


def test_predict_from_checkpoint_alone(run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path) -> None:
    """Predictions carry the input's fields, a known label and top-k (--model.top_k 2) probabilities summing to <= 1."""
    run = run_cli(
        "fit",
        "--trainer.max_epochs",
        "2",
        "--model.top_k",
        "1",
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    ckpt = run / "checkpoints" / "last.ckpt"
    assert load_task_module(ckpt).vocabulary.names == ["food", "money", "sport"]
    rows = [{k: v for k, v in r.items() if k != "label"} | {"source": "web"} for r in labelled_rows(5, 9)]
    predict_file = write_jsonl(tmp_path / "predict.jsonl", rows)
    main(
        [
            "predict",
            "--ckpt_path",
            str(ckpt),
            "--data.predict_path",
            str(predict_file),
            "--model.top_k",
            "2",
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(tmp_path / "p"),
        ]
    )
    written = tmp_path / "p" / "eval" / "predict-1" / "predictions.jsonl"
    out = [json.loads(line) for line in written.read_text().splitlines()]
    assert [o["id"] for o in out] == [r["id"] for r in rows] and all(o["source"] == "web" for o in out)
    for record in out:
        assert record["predicted"] in ("food", "money", "sport")
        assert (
            len(record["probabilities"]) == 2 and sum(record["probabilities"].values()) <= 1.0 + 1e-5
        )  # six-decimal rounding
        assert record["predicted"] == max(record["probabilities"], key=record["probabilities"].get)
    main(
        [
            "predict",
            "--ckpt_path",
            str(ckpt),
            "--data.predict_path",
            str(predict_file),
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(tmp_path / "q"),
        ]
    )
    written = tmp_path / "q" / "eval" / "predict-1" / "predictions.jsonl"
    stored = [json.loads(line) for line in written.read_text().splitlines()]
    assert all(len(o["probabilities"]) == 1 for o in stored)  # the checkpoint's top_k, unless the command sets one
