"""Fine-tuning from a local Hugging Face BERT directory; `convert to-hf` refuses what BERT cannot express (the
export itself is a property of the reference run: test_reference_run.py)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import BertModel

from tests.hf_folders import BERT_ARCH, tiny_bert
from tests.tasks.text_classification.conftest import labelled_rows, write_csv
from tetraformer.cli.commands import convert_command
from tetraformer.data import load_tokenizer
from tetraformer.interop import InteropError
from tetraformer.training.checkpointing.loading import load_task_module

TEXTS = ["the goal and bread", "price of soup today", "a match"]


@pytest.fixture
def hf_bert(tmp_path: Path) -> Path:
    """A tiny random BertModel saved with a WordPiece tokenizer of the fixture text beside it."""
    out = tmp_path / "hf_bert"
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    tiny_bert(out, [write_csv(tmp_path / "tok.csv", labelled_rows(60, 0))], BertModel, **no_dropout)
    return out


def test_init_from_hf_bert_keeps_encoder_and_tokenizer(
    run_cli: Callable[..., Path], splits: dict[str, Path], hf_bert: Path
) -> None:
    """Before training (lr 0), the classifier's encoder equals transformers' BertModel; the tokenizer is HF's."""
    run = run_cli(
        "fit",
        "--model.init_from",
        str(hf_bert),
        "--trainer.max_steps",
        "1",
        "--model.optim.lr",
        "0",
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    module = load_task_module(run / "checkpoints" / "last.ckpt")
    assert not (run / "tokenizer").exists()  # no tokenizer was trained: the source's is used
    assert module.tokenizer.get_vocab() == load_tokenizer(hf_bert).get_vocab()
    batch = module.tokenizer(TEXTS, padding=True, return_tensors="pt")
    ours = module.net.backbone(batch["input_ids"], batch["attention_mask"].bool()).last_hidden_state
    theirs = BertModel.from_pretrained(hf_bert).eval()(**batch).last_hidden_state
    mask = batch["attention_mask"].bool()
    torch.testing.assert_close(ours[mask], theirs[mask], atol=1e-5, rtol=1e-5)


def test_export_refuses_what_bert_cannot_express(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path
) -> None:
    """Mean pooling (BERT reads [CLS] through its pooler) is a clear error, not a wrong model."""
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "1",
        model={"arch": BERT_ARCH, "pooling": "mean"},
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    with pytest.raises(InteropError, match="pooling='mean'.*reads \\[CLS\\].*--model.pooling cls"):
        convert_command(["to-hf", str(run / "checkpoints" / "last.ckpt"), str(tmp_path / "out")])
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))  # nothing half-written


def test_init_from_a_package_folder(
    run_cli: Callable[..., Path],
    splits: dict[str, Path],
    hf_bert: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--model.init_from pkg:PACKAGE/model` (weights published as a Python package) starts from the folder
    inside the installed package, its tokenizer included, and the run's config keeps the portable name."""
    package = tmp_path / "site" / "tiny_bert_weights"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copytree(hf_bert, package / "model")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    run = run_cli(
        "fit",
        "--model.init_from",
        "pkg:tiny_bert_weights/model",
        "--trainer.max_steps",
        "1",
        "--model.optim.lr",
        "0",
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    module = load_task_module(run / "checkpoints" / "last.ckpt")
    assert module.tokenizer.get_vocab() == load_tokenizer(hf_bert).get_vocab()
    expected = BertModel.from_pretrained(hf_bert).embeddings.word_embeddings.weight
    torch.testing.assert_close(module.net.backbone.embed.tokens.weight, expected)
    assert "pkg:tiny_bert_weights/model" in (run / "config.yaml").read_text()
