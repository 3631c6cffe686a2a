"""W&B mode resolution and the default loggers."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightning.pytorch.loggers import WandbLogger

from tetraformer.training.reports.loggers import RunConfig, RunCSVLogger, make_loggers, wandb_mode


@pytest.mark.parametrize(
    ("env", "key", "expected"),
    [
        ({}, False, "offline"),
        ({"WANDB_MODE": "offline"}, True, "offline"),
        ({}, True, "online"),
        ({"WANDB_MODE": "disabled"}, False, "disabled"),
    ],
)
def test_auto_mode(env: dict, key: bool, expected: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """auto: online only with credentials, and WANDB_MODE wins."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc credentials
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if key:
        monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert wandb_mode("auto") == expected


def test_csv_always_and_wandb_unless_disabled(tmp_path: Path) -> None:
    """CSV is always there; W&B is added unless disabled."""
    on = make_loggers(tmp_path, RunConfig(wandb="offline", project="p", tags=["a"]))
    off = make_loggers(tmp_path, RunConfig(wandb="disabled"))
    assert [type(lg) for lg in on] == [RunCSVLogger, WandbLogger]
    assert [type(lg) for lg in off] == [RunCSVLogger]
