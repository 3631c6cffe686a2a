"""init_from a Tetraformer checkpoint with a backbone (the masked-LM shape): encoder and tokenizer reused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.tasks.text_classification.conftest import labelled_rows, write_csv
from tetraformer.core import MaskedLMHead, TextEncoder, TransformerConfig
from tetraformer.data import train_tokenizer
from tetraformer.payload import make_checkpoint, save_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module


class PretrainedNet(nn.Module):
    """An encoder backbone with an MLM head, as a masked-LM task network holds them."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.backbone, self.cfg, self.head = TextEncoder(cfg), cfg, MaskedLMHead(cfg)


def test_init_from_pretrained_checkpoint(run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path) -> None:
    """Before training (lr 0) the backbone equals the source's; its stored tokenizer is used, none is trained."""
    tokenizer = train_tokenizer([write_csv(tmp_path / "t.csv", labelled_rows(90, 4))], "char", 60, tmp_path / "tok")
    cfg = TransformerConfig(
        d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=len(tokenizer), max_len=64, type_vocab_size=2
    )
    torch.manual_seed(0)
    source = PretrainedNet(cfg)
    ckpt = save_checkpoint(make_checkpoint(source, None, tokenizer), tmp_path / "mlm.ckpt")
    run = run_cli(
        "fit",
        "--model.init_from",
        str(ckpt),
        "--trainer.max_steps",
        "1",
        "--model.optim.lr",
        "0",
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    module = load_task_module(run / "checkpoints" / "last.ckpt")
    assert not (run / "tokenizer").exists()
    assert module.tokenizer.get_vocab() == tokenizer.get_vocab()
    for key, value in source.backbone.state_dict().items():
        assert torch.equal(module.net.backbone.state_dict()[key], value), key


def test_max_length_beyond_pretrained_positions_is_one_line(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--data.max_length longer than the source's position table: one line naming both, not a traceback."""
    tokenizer = train_tokenizer([write_csv(tmp_path / "t.csv", labelled_rows(90, 4))], "char", 60, tmp_path / "tok")
    cfg = TransformerConfig(
        d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=len(tokenizer), max_len=16, type_vocab_size=2
    )
    ckpt = save_checkpoint(make_checkpoint(PretrainedNet(cfg), None, tokenizer), tmp_path / "short.ckpt")
    with pytest.raises(SystemExit) as exit_info:
        run_cli(
            "fit",
            "--model.init_from",
            str(ckpt),
            "--trainer.max_steps",
            "1",
            train_path=str(splits["train"]),
            val_path=str(splits["val"]),
        )
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: --data.max_length 48 is longer than") and "at most 16" in line


def test_bucketed_batches_and_fixed_labels(run_cli: Callable[..., Path], splits: dict[str, Path]) -> None:
    """`--data.bucket true` trains; `--data.labels` fixes the vocabulary's order (and may name unseen labels)."""
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "3",
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
        bucket=True,
        labels=["sport", "money", "food", "other"],
    )
    assert load_task_module(run / "checkpoints" / "last.ckpt").vocabulary.names == ["sport", "money", "food", "other"]
