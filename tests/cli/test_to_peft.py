"""`convert to-peft` refuses in one line what it cannot write: a checkpoint without adapters."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetraformer.cli.export import export_adapters
from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.errors import TetraformerError
from tetraformer.payload import make_checkpoint, save_checkpoint


def test_a_checkpoint_without_adapters_is_named(tmp_path: Path) -> None:
    """A whole network's checkpoint has no adapters to write apart: the line says so and names convert to-hf;
    nothing is written."""
    cfg = TransformerConfig(d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=50, max_len=16)
    net = CausalLM(cfg)
    ckpt = save_checkpoint(
        make_checkpoint(net, "tasks.language_modeling.module.LanguageModeling", None), tmp_path / "plain.ckpt"
    )
    with pytest.raises(TetraformerError, match="holds no LoRA adapters") as err:
        export_adapters(ckpt, tmp_path / "out")
    assert str(ckpt) in str(err.value) and "convert to-hf" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()
