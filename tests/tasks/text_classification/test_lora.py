"""LoRA on a pretrained encoder for text classification: adapters and the new classifier train, the base does not."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.tasks.text_classification.conftest import labelled_rows, write_csv
from tests.tasks.text_classification.test_init_from import PretrainedNet
from tetraformer.core import TransformerConfig
from tetraformer.core.lora import lora_layers
from tetraformer.data import train_tokenizer
from tetraformer.payload import NETWORK_PREFIX, make_checkpoint, read_checkpoint, save_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module


def test_lora_classifier_fit(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The log counts trainable parameters; the checkpoint holds the adapters and the classifier (trained in full)
    only; loaded, the encoder's base weights are the source's and every adapter has moved."""
    caplog.set_level(logging.INFO, logger="tetraformer")
    tokenizer = train_tokenizer([write_csv(tmp_path / "t.csv", labelled_rows(90, 4))], "char", 60, tmp_path / "tok")
    cfg = TransformerConfig(
        d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=len(tokenizer), max_len=64, type_vocab_size=2
    )
    source = PretrainedNet(cfg)
    ckpt = save_checkpoint(make_checkpoint(source, None, tokenizer), tmp_path / "mlm.ckpt")
    targets = "[q, k, v, o, ff_in, ff_out]"
    lora = ("--model.lora.rank", "2", "--model.lora.targets", targets, "--model.lora.dropout", "0.1")
    run = run_cli(
        "fit",
        "--model.init_from",
        str(ckpt),
        *lora,
        "--trainer.max_steps",
        "4",
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    assert (
        "LoRA rank 2 (alpha 16) on 8 layers (q, k, v, o, ff_in, ff_out)" in caplog.text
        and "trainable of" in caplog.text
    )
    last = run / "checkpoints" / "last.ckpt"
    stored = [k[len(NETWORK_PREFIX) :] for k in read_checkpoint(last)["state_dict"] if k.startswith(NETWORK_PREFIX)]
    assert stored and all(".lora_" in k or k.startswith("head.") for k in stored)
    assert any(k.startswith("head.") for k in stored)
    net = load_task_module(last).net
    backbone = net.backbone.state_dict()
    for key, value in source.backbone.state_dict().items():
        assert torch.equal(backbone[key], value), key
    assert all(b.abs().sum() > 0 for layer in lora_layers(net) for b in layer.lora_b)
