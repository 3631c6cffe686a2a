"""Llama-family checkpoints through the CLI: `convert from-hf/to-hf`, `generate` and `--model.init_from HF_DIR`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers

from tests.hf_folders import tiny_causal_lm
from tests.tasks.language_modeling.conftest import hf_validation_loss, validation_loss
from tetraformer.cli import main
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module

LANGUAGE_MODELING = "tasks.language_modeling.module.LanguageModeling"
SHAPE = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
CONFIGS = {
    "LlamaForCausalLM": lambda v: transformers.LlamaConfig(vocab_size=v, **SHAPE, tie_word_embeddings=True),
    "Qwen3ForCausalLM": lambda v: transformers.Qwen3Config(vocab_size=v, **SHAPE, head_dim=16),
    "MistralForCausalLM": lambda v: transformers.MistralConfig(vocab_size=v, **SHAPE, sliding_window=6),
}


def hf_decoder(out: Path, text_file: Path, architecture: str) -> Path:
    """A tiny random model of `architecture` saved with a char tokenizer of the fixture text."""
    tiny_causal_lm(out, [text_file], CONFIGS[architecture])
    transformers.GenerationConfig(max_new_tokens=7, do_sample=False).save_pretrained(out)
    return out


@pytest.mark.parametrize("architecture", CONFIGS)
def test_convert_both_ways(architecture: str, text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """from-hf gives a LanguageModeling checkpoint with the source's logits that `generate` uses; to-hf of it gives
    a directory transformers loads as the same architecture, with the same logits, tokenizer and generation config."""
    src = hf_decoder(tmp_path / "src", text_file, architecture)
    ckpt, out = tmp_path / "model.ckpt", tmp_path / "exported"
    main(["convert", "from-hf", str(src), str(ckpt)])
    assert read_checkpoint(ckpt)[PAYLOAD_KEY]["class_path"] == LANGUAGE_MODELING
    main(["generate", "--ckpt", str(ckpt), "--prompt", "First", "--max-new-tokens", "5", "--greedy"])
    assert capsys.readouterr().out.startswith("First")
    main(["convert", "to-hf", str(ckpt), str(out)])
    theirs, exported = (getattr(transformers, architecture).from_pretrained(p).eval() for p in (src, out))
    ours = load_task_module(ckpt).net
    ids = torch.randint(0, ours.cfg.vocab_size, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids).logits, atol=1e-4, rtol=0)
        torch.testing.assert_close(exported(input_ids=ids).logits, theirs(input_ids=ids).logits, atol=1e-5, rtol=0)
    assert (out / "tokenizer.json").is_file()


def test_save_hf_carries_the_generation_config(text_file: Path, tmp_path: Path) -> None:
    """load_hf then save_hf copies generation_config.json along with the tokenizer files."""
    from tetraformer.interop import load_hf, save_hf

    src = hf_decoder(tmp_path / "src", text_file, "LlamaForCausalLM")
    out = save_hf(load_hf(src), tmp_path / "out")
    assert transformers.GenerationConfig.from_pretrained(out).max_new_tokens == 7
    assert (out / "tokenizer.json").is_file()


def test_init_from_hf_dir_validates_to_the_imported_loss(
    run_cli: Callable[..., Path], text_file: Path, tmp_path: Path
) -> None:
    """`--model.init_from QWEN3_DIR` validates to transformers' own loss on the same blocks."""
    src = hf_decoder(tmp_path / "src", text_file, "Qwen3ForCausalLM")
    data = {"train_path": str(text_file), "val_path": str(text_file), "documents": "line", "tokenizer": str(src)}
    imported = run_cli("validate", "--model.init_from", str(src), root=tmp_path / "v", **data)
    assert validation_loss(imported) == pytest.approx(hf_validation_loss(src, text_file, "Qwen3ForCausalLM"), rel=1e-5)
