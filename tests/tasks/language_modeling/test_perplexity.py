"""LM perplexity is the epoch's: exp of the token-weighted mean NLL over all validation blocks."""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import pytest
import torch

from tasks.language_modeling.data import LanguageModelingData
from tasks.language_modeling.module import LanguageModeling
from tetraformer.core import TransformerConfig
from tetraformer.training.base.optim import OptimizerConfig
from tetraformer.training.callbacks.spec_handover import DataSpecHandover

BATCH_SIZE = 8


def test_val_ppl_is_exp_of_the_epoch_loss_with_an_uneven_last_batch(tmp_path: Path, text_file: Path) -> None:
    """val/ppl == exp(NLL of all val tokens at once) with a short last batch; per-batch exp differs."""
    data = LanguageModelingData(
        train_path=str(text_file),
        val_path=str(text_file),
        documents="line",
        tokenizer_type="char",
        block_size=8,
        batch_size=BATCH_SIZE,
    )
    arch = TransformerConfig(d_model=32, n_heads=2, n_layers=1, d_ff=64, max_len=16, dropout=0.0)
    optim = OptimizerConfig(lr=3e-3, warmup_steps=5, schedule="constant")
    module = LanguageModeling(arch=arch, optim=optim, sample_prompts=[])
    trainer = L.Trainer(
        default_root_dir=str(tmp_path),
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_steps=30,
        callbacks=[DataSpecHandover(data)],
    )
    trainer.fit(module, datamodule=data)  # a trained model: batches differ in loss
    result = trainer.validate(module, datamodule=data)[0]
    val = data.datasets["val"]
    blocks = torch.stack([val[i] for i in range(len(val))])  # (N, T + 1)
    assert len(blocks) % BATCH_SIZE != 0
    module.eval()
    with torch.no_grad():
        losses = [
            torch.nn.functional.cross_entropy(module.net(b[:, :-1]).flatten(0, 1), b[:, 1:].flatten(), reduction="sum")
            for b in blocks.split(BATCH_SIZE)
        ]
    tokens = blocks[:, 1:].numel()
    nll = sum(loss.item() for loss in losses) / tokens
    assert result["val/loss"] == pytest.approx(nll, rel=1e-5)
    assert result["val/ppl"] == pytest.approx(math.exp(nll), rel=1e-5)
    sizes = [len(b) for b in blocks.split(BATCH_SIZE)]
    per_batch = [math.exp(loss.item() / (n * (blocks.shape[1] - 1))) for loss, n in zip(losses, sizes, strict=True)]
    assert sum(per_batch) / len(per_batch) != pytest.approx(math.exp(nll), rel=1e-3)  # the check can tell
