"""The reference run's checkpoint alone: the label vocabulary survives it, `predict` keeps the input's other fields
and the checkpoint's top_k, `test` writes the per-class report and confusion matrix, an unknown label names its row,
and `convert to-hf` gives transformers' BertForSequenceClassification."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from transformers import BertForSequenceClassification

from tests.cli_runner import checkpoint_command, last_metrics, predictions
from tests.tasks.text_classification.conftest import labelled_rows, write_csv, write_jsonl
from tetraformer.cli.commands import convert_command
from tetraformer.training.checkpointing.loading import load_task_module

Run = tuple[Path, dict[str, Path]]


def test_the_run_validates_accuracy_and_macro_f1(trained_run: Run) -> None:
    """Validation logs accuracy and macro-F1, each a fraction."""
    metrics = last_metrics(trained_run[0])
    assert 0.0 <= metrics["val/acc"] <= 1.0 and 0.0 <= metrics["val/f1_macro"] <= 1.0, metrics


def test_predict_from_checkpoint_alone(trained_run: Run, tmp_path: Path) -> None:
    """Predictions carry the input's fields, a known label and top-k (--model.top_k 2) probabilities summing to <= 1;
    without the option, the checkpoint's top_k (1)."""
    ckpt = trained_run[0] / "checkpoints" / "last.ckpt"
    assert load_task_module(ckpt).vocabulary.names == ["food", "money", "sport"]
    rows = [{k: v for k, v in r.items() if k != "label"} | {"source": "web"} for r in labelled_rows(5, 9)]
    predict_file = write_jsonl(tmp_path / "predict.jsonl", rows)
    out = predictions(ckpt, predict_file, tmp_path / "p", "--model.top_k", "2")
    assert [o["id"] for o in out] == [r["id"] for r in rows] and all(o["source"] == "web" for o in out)
    for record in out:
        assert record["predicted"] in ("food", "money", "sport")
        assert (
            len(record["probabilities"]) == 2 and sum(record["probabilities"].values()) <= 1.0 + 1e-5
        )  # six-decimal rounding
        assert record["predicted"] == max(record["probabilities"], key=record["probabilities"].get)
    stored = predictions(ckpt, predict_file, tmp_path / "q")
    assert all(len(o["probabilities"]) == 1 for o in stored)  # the checkpoint's top_k, unless the command sets one


def test_test_stage_writes_per_class_report_and_confusion(trained_run: Run, tmp_path: Path) -> None:
    """`test` from the checkpoint alone reports accuracy, macro-F1, per-class P/R/F1 and a confusion matrix."""
    run, files = trained_run
    ckpt = run / "checkpoints" / "last.ckpt"
    tested = checkpoint_command("test", ckpt, tmp_path / "t", "--data.test_path", str(files["test"]))
    assert {"test/acc", "test/f1_macro"} <= set(last_metrics(tmp_path / "t", "test"))
    with (tested / "reports" / "test_per_class.csv").open(encoding="utf-8") as f:
        labels = [row[0] for row in csv.reader(f)][1:]
    assert labels[:3] == ["food", "money", "sport"]
    assert (tested / "reports" / "test_confusion.png").is_file()


def test_unseen_test_label_from_checkpoint(
    trained_run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A test label the checkpoint's vocabulary lacks is an error at its row, listing the known labels."""
    bad = write_csv(tmp_path / "bad_test.csv", [{"text": "goal", "label": "sport"}, {"text": "x", "label": "art"}])
    with pytest.raises(SystemExit):
        checkpoint_command(
            "test", trained_run[0] / "checkpoints" / "last.ckpt", tmp_path / "t", "--data.test_path", str(bad)
        )
    assert "bad_test.csv:3: unknown label 'art'; known labels: 'food', 'money', 'sport'\n" in capsys.readouterr().err


def test_export_round_trips_logits_and_labels(trained_run: Run, tmp_path: Path) -> None:
    """transformers' BertForSequenceClassification on the exported directory gives our logits and label names."""
    ckpt = trained_run[0] / "checkpoints" / "last.ckpt"
    convert_command(["to-hf", str(ckpt), str(tmp_path / "hf_out")])
    module = load_task_module(ckpt)
    hf = BertForSequenceClassification.from_pretrained(tmp_path / "hf_out").eval()
    assert hf.config.id2label == {0: "food", 1: "money", 2: "sport"}
    texts = ["the goal and bread", "price of soup today", "a match"]
    batch = module.tokenizer(texts, texts[::-1], padding=True, return_tensors="pt")  # pairs: segments 0 and 1
    types = torch.tensor([e.type_ids for e in batch.encodings])  # (B, T)
    assert types.max() == 1
    ours = module.net(batch["input_ids"], attention_mask=batch["attention_mask"].bool(), token_type_ids=types)
    theirs = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=types).logits
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
