"""Fine-tuning from Hugging Face GPT-2 weights through the CLI, and `convert` both ways."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from tests.hf_folders import tiny_causal_lm
from tests.tasks.language_modeling.conftest import hf_validation_loss, validation_loss
from tetraformer.cli import main
from tetraformer.cli.commands import convert_command
from tetraformer.interop import InteropError
from tetraformer.training.checkpointing.loading import load_task_module

GPT2 = dict(n_positions=64, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


@pytest.fixture
def hf_gpt2(tmp_path: Path, text_file: Path) -> Path:
    """A tiny random GPT2LMHeadModel saved with a char tokenizer of the fixture text."""
    return tiny_causal_lm(tmp_path / "hf_gpt2", [text_file], lambda vocab: GPT2Config(vocab_size=vocab, **GPT2))


def imported(run_cli: Callable[..., Path], hf_gpt2: Path, text_file: Path, root: Path) -> tuple[Path, dict]:
    """`validate --model.init_from HF_DIR` of the fixture text into `root`: (its run dir, the data options)."""
    data = {"train_path": str(text_file), "val_path": str(text_file), "documents": "line", "tokenizer": str(hf_gpt2)}
    return run_cli("validate", "--model.init_from", str(hf_gpt2), root=root, **data), data


def test_first_validation_equals_imported_model(
    run_cli: Callable[..., Path], hf_gpt2: Path, text_file: Path, tmp_path: Path
) -> None:
    """`--model.init_from HF_DIR` validates to the imported model's own loss (transformers' on the same blocks)."""
    run, _ = imported(run_cli, hf_gpt2, text_file, tmp_path / "v")
    assert validation_loss(run) == pytest.approx(hf_validation_loss(hf_gpt2, text_file), rel=1e-5)


@pytest.mark.learning
def test_fine_tuning_lowers_the_imported_loss(
    run_cli: Callable[..., Path], hf_gpt2: Path, text_file: Path, tmp_path: Path
) -> None:
    """A fit from `--model.init_from HF_DIR` validates below the imported model."""
    start, data = imported(run_cli, hf_gpt2, text_file, tmp_path / "v")
    tuned = run_cli("fit", "--model.init_from", str(hf_gpt2), "--trainer.max_steps", "30", root=tmp_path / "f", **data)
    assert validation_loss(tuned) < validation_loss(start)


def test_convert_both_ways(
    run_cli: Callable[..., Path],
    hf_gpt2: Path,
    text_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """from-hf gives a checkpoint `generate` uses; to-hf gives a directory transformers loads with equal logits."""
    ckpt = tmp_path / "gpt2.ckpt"
    main(["convert", "from-hf", str(hf_gpt2), str(ckpt)])
    main(["generate", "--ckpt", str(ckpt), "--prompt", "First", "--max-new-tokens", "5", "--greedy"])
    assert capsys.readouterr().out.startswith("First")
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "5",
        "--model.arch.position",
        "learned",
        train_path=str(text_file),
        documents="line",
    )
    out = tmp_path / "exported"
    main(["convert", "to-hf", str(run / "checkpoints" / "last.ckpt"), str(out)])
    ours = load_task_module(run / "checkpoints" / "last.ckpt").net
    theirs = GPT2LMHeadModel.from_pretrained(out).eval()
    ids = torch.randint(0, ours.cfg.vocab_size, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(theirs(input_ids=ids).logits, ours(ids), atol=1e-4, rtol=0)
    assert (out / "tokenizer.json").is_file()


def test_convert_refuses_what_no_family_can_express(trained_run: Path, tmp_path: Path) -> None:
    """A rotary-position GPT with LayerNorm and GELU is neither GPT-2 nor a Llama: to-hf says which fields differ
    instead of writing a wrong model."""
    with pytest.raises(InteropError, match=r"cannot export as Llama.*'norm': 'layernorm'"):
        convert_command(["to-hf", str(trained_run / "checkpoints" / "last.ckpt"), str(tmp_path / "x")])
