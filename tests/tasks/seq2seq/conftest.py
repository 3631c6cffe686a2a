"""Fixtures for seq2seq runs through the `tetraformer` CLI, in-process: reversal pairs and tiny configs."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import DATA_SEED, TEST_SEED, config_runner

ALPHABET = "abcdefgh"

# the two ready architectures at test size: T5-style and the 2017 paper's
ARCHS = {
    "t5": {
        "position": "relative",
        "norm": "rmsnorm",
        "norm_position": "pre",
        "activation": "geglu_tanh",
        "bias": False,
        "tie_embeddings": True,
    },
    "2017": {
        "position": "sinusoidal",
        "norm": "layernorm",
        "norm_position": "post",
        "activation": "relu",
        "scale_embeddings": True,
        "init_std": 0.125,
    },  # the paper's embedding scale: N(0, d^-1/2) * sqrt(d)
}


def reversal_pairs(n: int, seed: int = 0, reverse: bool = True) -> list[dict[str, str]]:
    """n pairs of a random 3-6 letter word and its reversal (or copy)."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(3, 6))) for _ in range(n)]
    return [{"source": w, "target": w[::-1] if reverse else w} for w in words]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Rows as JSON lines."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def tiny_config(root: Path, arch: str = "t5", model: dict | None = None, **data: object) -> dict:
    """A char-level encoder-decoder small enough to train in seconds on 2 cores."""
    return {
        "seed_everything": TEST_SEED,
        "trainer": {
            "default_root_dir": str(root),
            "max_steps": 20,
            "val_check_interval": 10,
            "check_val_every_n_epoch": None,
            "log_every_n_steps": 1,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "accelerator": "cpu",
            "devices": 1,
        },
        "model": {
            "class_path": "tasks.seq2seq.module.Seq2Seq",
            "init_args": {
                "arch": {
                    "d_model": 64,
                    "n_heads": 4,
                    "n_layers": 2,
                    "n_decoder_layers": 2,
                    "d_ff": 128,
                    "max_len": 32,
                    **ARCHS[arch],
                },
                "optim": {"lr": 3e-3, "warmup_steps": 10, "schedule": "constant", "weight_decay": 0.0},
                "generation": {"max_new_tokens": 10, "do_sample": False, "num_beams": 1},
                "val_generate_batches": 1,
                **(model or {}),
            },
        },
        "data": {
            "class_path": "tasks.seq2seq.data.Seq2SeqData",
            "init_args": {"tokenizer_type": "char", "vocab_size": 100, "batch_size": 32, "seed": DATA_SEED, **data},
        },
        "run": {"wandb": "disabled"},
    }


@pytest.fixture
def pairs_file(tmp_path: Path) -> Path:
    """400 reversal pairs as JSONL."""
    return write_jsonl(tmp_path / "pairs.jsonl", reversal_pairs(400))


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config and run `tetraformer SUBCOMMAND -c it ARGS...`; returns the run dir."""
    return config_runner(tmp_path, monkeypatch, tiny_config)
