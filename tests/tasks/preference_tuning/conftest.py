"""Fixtures for preference tuning: pairs made from the packaged chats, tiny configs, a Qwen2 folder to start from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli_runner import config_runner, tiny_run_config
from tests.tasks.instruction_tuning.conftest import (
    CHATS,
    qwen2_folder,
    trained_run,  # noqa: F401 - the chat checkpoint DPO starts from
)

PREFERENCE_TUNING = "tasks.preference_tuning.module.PreferenceTuning"
PREFERENCE_DATA = "tasks.preference_tuning.data.PreferenceData"
LORA = {"rank": 4, "alpha": 8, "targets": ["q", "k", "v", "o", "ff_in", "ff_out", "head"]}


def reversed_pairs() -> list[dict[str, Any]]:
    """A learnable pair per packaged chat: its prompt (the turns before its last reply), the reply as chosen and the
    reply's words in reverse order as rejected (a rule a tiny model generalises to held-out pairs)."""
    pairs = []
    for line in CHATS.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        messages = record.get("messages") or [
            {"role": "user", "content": record["prompt"]},
            {"role": "assistant", "content": record["response"]},
        ]
        reply = messages[-1]["content"]
        pairs.append({"prompt": messages[:-1], "chosen": reply, "rejected": " ".join(reversed(reply.split()))})
    return pairs


def write_pairs(path: Path, pairs: list[dict[str, Any]]) -> Path:
    """The pairs as JSONL at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    return path


def tiny_config(root: Path, model: dict[str, Any] | None = None, **data: Any) -> dict[str, Any]:
    """A config for DPO on the reversed pairs (a quarter held out) from `model`'s init_from, which it must name."""
    model = {
        "optim": {"lr": 1e-2, "warmup_steps": 2, "schedule": "constant", "weight_decay": 0.0},
        "generation": {"max_new_tokens": 8, "do_sample": False},
        **(model or {}),
    }
    pairs = write_pairs(root.parent / "pairs.jsonl", reversed_pairs())
    data = {"train_path": str(pairs), "max_length": 128, "batch_size": 4, "val_fraction": 0.25, **data}
    trainer = {"max_steps": 16, "val_check_interval": 8, "check_val_every_n_epoch": None}
    return tiny_run_config(root, PREFERENCE_TUNING, PREFERENCE_DATA, model, data, **trainer)


@pytest.fixture(scope="session")
def qwen2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2 folder with a character tokenizer of the chats (no chat template: ChatML is added)."""
    return qwen2_folder(tmp_path_factory.mktemp("pref-qwen2") / "qwen2")


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write a tiny config (with model and data overrides) and run `tetraformer SUBCOMMAND -c it ARGS...`; returns
    the run dir."""
    return config_runner(tmp_path, monkeypatch, tiny_config)
