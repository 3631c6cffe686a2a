"""Starting from a local Hugging Face BERT token classifier (the export, `convert to-hf`, is a property of the
reference run: test_reference_run.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import BertForTokenClassification

from tests.hf_folders import tiny_bert
from tests.tasks.token_classification.conftest import tagged_sentences
from tetraformer.data import load_tokenizer
from tetraformer.training.checkpointing.loading import load_task_module

TEXTS = ["we met anna smith in oslo", "boris went to lima", "the"]


@pytest.fixture
def hf_tagger(tmp_path: Path) -> Path:
    """A tiny random BertForTokenClassification (5 labels: the fixture's IOB2 tags) with a WordPiece tokenizer."""
    out = tmp_path / "hf_tagger"
    text = tmp_path / "words.txt"
    text.write_text("".join(" ".join(w for w, _ in s) + "\n" for s in tagged_sentences(80, 3)), encoding="utf-8")
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    tiny_bert(out, [text], BertForTokenClassification, num_labels=5, **no_dropout)
    return out


def batch_of(tokenizer, texts: list[str]) -> dict[str, torch.Tensor]:
    """Padded ids and mask of some texts."""
    return dict(tokenizer(texts, padding=True, return_tensors="pt"))


def test_init_from_hf_token_classifier_gives_its_logits(
    run_cli: Callable[..., Path], splits: dict[str, Path], hf_tagger: Path
) -> None:
    """Before training (lr 0) the tagger is transformers' model: same logits; its tokenizer is used, none trained."""
    run = run_cli(
        "fit",
        "--model.init_from",
        str(hf_tagger),
        "--trainer.max_steps",
        "1",
        "--model.optim.lr",
        "0",
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    module = load_task_module(run / "checkpoints" / "last.ckpt")
    assert not (run / "tokenizer").exists()
    assert module.tokenizer.get_vocab() == load_tokenizer(hf_tagger).get_vocab()
    batch = batch_of(module.tokenizer, TEXTS)
    ours = module.net(batch["input_ids"], attention_mask=batch["attention_mask"].bool())
    theirs = BertForTokenClassification.from_pretrained(hf_tagger).eval()(**batch).logits
    mask = batch["attention_mask"].bool()
    torch.testing.assert_close(ours[mask], theirs[mask], atol=1e-5, rtol=1e-5)
