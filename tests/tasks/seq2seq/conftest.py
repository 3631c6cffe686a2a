"""Fixtures for seq2seq runs through the `tetraformer` CLI, in-process: reversal pairs, tiny configs and the
module-scoped reference run whose artifacts carry the properties of an ordinary fit."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn
from transformers import T5ForConditionalGeneration

from tests.cli_runner import config_runner, tiny_run_config
from tetraformer.cli import main

ALPHABET = "abcdefgh"
GENERATION_METRICS = ["bleu", "chrf", "rouge1", "rouge2", "rougeL"]

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
    arch_options = {"d_model": 64, "n_heads": 4, "n_layers": 2, "n_decoder_layers": 2, "d_ff": 128, "max_len": 32}
    return tiny_run_config(
        root,
        "tasks.seq2seq.module.Seq2Seq",
        "tasks.seq2seq.data.Seq2SeqData",
        {
            "arch": {**arch_options, **ARCHS[arch]},
            "optim": {"lr": 3e-3, "warmup_steps": 10, "schedule": "constant", "weight_decay": 0.0},
            "generation": {"max_new_tokens": 10, "do_sample": False, "num_beams": 1},
            "val_generate_batches": 1,
            **(model or {}),
        },
        {"tokenizer_type": "char", "vocab_size": 100, "batch_size": 32, **data},
        max_steps=20,
        val_check_interval=10,
        check_val_every_n_epoch=None,
    )


@pytest.fixture
def pairs_file(tmp_path: Path) -> Path:
    """400 reversal pairs as JSONL."""
    return write_jsonl(tmp_path / "pairs.jsonl", reversal_pairs(400))


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config and run `tetraformer SUBCOMMAND -c it ARGS...`; returns the run dir."""
    return config_runner(tmp_path, monkeypatch, tiny_config)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run, once per test file: 20 steps on 400 reversal pairs, validated (with generation metrics)
    every 10, the best checkpoint by val/bleu (max), an offline W&B run; its run directory."""
    tmp = tmp_path_factory.mktemp("seq2seq-reference")
    pairs = write_jsonl(tmp / "pairs.jsonl", reversal_pairs(400))
    config = tiny_config(tmp / "run", model={"metrics": GENERATION_METRICS}, train_path=str(pairs))
    config["run"] = {"wandb": "auto", "monitor": "val/bleu", "monitor_mode": "max"}
    (tmp / "fit.yaml").write_text(yaml.safe_dump(config))
    with pytest.MonkeyPatch.context() as env:
        env.delenv("WANDB_API_KEY", raising=False)
        env.setenv("WANDB_MODE", "offline")
        env.setenv("WANDB_SILENT", "true")
        main(["fit", "-c", str(tmp / "fit.yaml")])
    return tmp / "run"


def assert_hf_logits_equal(module: nn.Module, exported: Path, batch: dict, decoder: torch.Tensor) -> torch.Tensor:
    """Our logits for a batch equal those of the exported HF T5; returns ours."""
    hf = T5ForConditionalGeneration.from_pretrained(exported).eval()
    with torch.no_grad():
        ours = module.net(batch["input_ids"], decoder, batch["attention_mask"].bool())
        theirs = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], decoder_input_ids=decoder)
    torch.testing.assert_close(ours, theirs.logits, atol=1e-4, rtol=1e-4)
    return ours
