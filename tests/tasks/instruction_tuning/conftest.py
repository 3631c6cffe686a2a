"""Fixtures for instruction-tuning runs through the `tetraformer` CLI, in-process, on the packaged chat JSONL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import transformers

from tests.cli_runner import config_runner, tiny_run_config
from tests.hf_folders import tiny_causal_lm

CHATS = Path(__file__).parents[3] / "configs" / "instruction_tuning" / "chat_tiny.jsonl"
INSTRUCTION_TUNING = "tasks.instruction_tuning.module.InstructionTuning"
QWEN2 = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
QWEN2 |= dict(max_position_embeddings=256, tie_word_embeddings=False)  # the tiny Qwen2 folder's shape


def tiny_config(root: Path, **data: object) -> dict:
    """A config for a very small chat model (rotary, packed batches) that trains in seconds on 2 cores."""
    model = {
        "arch": {"d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "max_len": 96, "position": "rotary"},
        "optim": {"lr": 3e-3, "warmup_steps": 2, "schedule": "constant", "weight_decay": 0.0},
        "generation": {"max_new_tokens": 6, "do_sample": False},
    }
    data = {"train_path": str(CHATS), "vocab_size": 300, "max_length": 96, "batch_size": 4, **data}
    trainer = {"max_steps": 6, "val_check_interval": 3, "check_val_every_n_epoch": None}
    return tiny_run_config(
        root, INSTRUCTION_TUNING, "tasks.instruction_tuning.data.InstructionTuningData", model, data, **trainer
    )


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config (with data overrides) and run `tetraformer SUBCOMMAND -c it ARGS...`; returns the run dir."""
    return config_runner(tmp_path, monkeypatch, tiny_config)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run (the tiny config's 6 packed steps on the packaged chats, validated at 3 and 6), which every
    test of an ordinary run's artifacts reads: built once per test worker, never written to."""
    root = tmp_path_factory.mktemp("chat_reference")
    with pytest.MonkeyPatch.context() as patch:
        return config_runner(root, patch, tiny_config)("fit", batching="packed")


def qwen2_folder(out: Path) -> Path:
    """A tiny random Qwen2 (grouped-query attention, q/k/v biases) with a char tokenizer of the chats, saved."""
    corpus = out.parent / "chats.txt"
    corpus.write_text(CHATS.read_text(encoding="utf-8"), encoding="utf-8")  # every character the chats use
    return tiny_causal_lm(out, [corpus], lambda vocab: transformers.Qwen2Config(vocab_size=vocab, **QWEN2), 200)
