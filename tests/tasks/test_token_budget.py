"""A --run.max_tokens budget over padded text sizes the schedule at an epoch's mean tokens a step (stored rows)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import yaml

from tests.tasks.instruction_tuning.conftest import tiny_config as chat_config
from tests.tasks.test_throughput import TASKS
from tetraformer.cli import main

pytestmark = pytest.mark.slow  # every test here runs the CLI

# task -> (its tests' tiny config, data options given the data folder): the padded-text tasks, chat both ways
PADDED = {task: TASKS[task] for task in ("text_classification", "token_classification", "masked_lm", "seq2seq")}
PADDED |= {f"chat_{way}": (chat_config, lambda d, way=way: {"batching": way}) for way in ("padded", "packed")}
LR, FLOOR = 2e-3, 0.1
SCHEDULE = ["--model.optim.schedule", "cosine", "--model.optim.warmup_steps", "1", "--model.optim.lr", str(LR)]
SCHEDULE += ["--model.optim.min_lr_ratio", str(FLOOR), "--trainer.limit_val_batches", "0", "--trainer.max_steps", "-1"]


def fit(task: str, root: Path, data: Path, *options: str) -> dict:
    """Fit the task's tiny config on its fixture into `root`; its last checkpoint."""
    build, files = PADDED[task]
    config = root.parent / f"{root.name}.yaml"
    config.write_text(yaml.safe_dump(build(root, **files(data))))
    main(["fit", "-c", str(config), *SCHEDULE, *options])
    return torch.load(root / "checkpoints" / "last.ckpt", weights_only=True)


@pytest.mark.parametrize("task", list(PADDED))
def test_a_budget_of_two_epochs_is_two_epochs_of_steps(
    task: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two epochs' real tokens as --run.max_tokens, with 50 epochs allowed: the schedule is sized by the stored rows'
    tokens (the log line names one epoch's count, which the batches' count matches), the run ends on the second
    epoch's last step having trained on exactly the budget, and the cosine ends there at min_lr_ratio x lr."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "data").mkdir()
    two = fit(task, tmp_path / "epochs", tmp_path / "data", "--trainer.max_epochs", "2")
    steps, tokens = two["global_step"], two["callbacks"]["Throughput"]["tokens_seen"]
    with caplog.at_level(logging.INFO, logger="tetraformer.training.base.optim"):
        budget = fit(
            task, tmp_path / "budget", tmp_path / "data", "--trainer.max_epochs", "50", "--run.max_tokens", str(tokens)
        )
    assert f"(an epoch's {tokens // 2:,} tokens over its {steps // 2:,} steps)" in caplog.text
    assert budget["global_step"] == steps and budget["callbacks"]["Throughput"]["tokens_seen"] == tokens
    assert budget["optimizer_states"][0]["param_groups"][0]["lr"] == pytest.approx(LR * FLOOR)
