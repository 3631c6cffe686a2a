"""cli/quiet.py: the CLI drops third-party chatter that tells a user nothing, and nothing else."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator

import pytest
from lightning.fabric.utilities.warnings import PossibleUserWarning
from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy, SingleDeviceStrategy

from tetraformer.cli.quiet import (
    FILE_ENVIRONMENT,
    QUIET_ENVIRONMENT,
    QUIET_LOGS,
    quiet_third_party,
    quiet_unsharded_averaging,
)

RANK_ZERO = "lightning.pytorch.utilities.rank_zero"


class Terminal:
    """A stand-in for sys.stderr that says whether it is a terminal."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A copy of the environment without the variables quiet sets, in place of os.environ for the test."""
    names = {*QUIET_ENVIRONMENT, *FILE_ENVIRONMENT}
    copy = {k: v for k, v in os.environ.items() if k not in names}
    monkeypatch.setattr(os, "environ", copy)
    yield copy


def passed(logger_name: str, messages: list[str]) -> list[str]:
    """The messages that get through a logger's filters once quiet is installed."""
    logger = logging.getLogger(logger_name)
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        for message in messages:
            logger.info(message)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return seen


def test_lightning_tips_and_empty_device_lines_go_the_rest_stays(environment: dict[str, str]) -> None:
    """The advertisements and the no-TPU line are dropped; the device used, seeds and stop reasons stay."""
    quiet_third_party()
    kept = [
        "GPU available: True (cuda), used: True",
        "GPU available: False, used: False",
        "Seed set to 3",
        "`Trainer.fit` stopped: `max_steps=20` reached.",
        "Restoring states from the checkpoint path at run/checkpoints/last.ckpt",
        "TPU available: True, using: 8 TPU cores",
    ]
    dropped = [
        "💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger]...",
        "💡 Tip: For seamless cloud uploads and versioning, try installing [litmodels]...",
        "TPU available: False, using: 0 TPU cores",
    ]
    assert passed(RANK_ZERO, kept + dropped) == kept
    assert passed("lightning.pytorch.accelerators.cuda", ["LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]"]) == []
    assert set(QUIET_LOGS) >= {RANK_ZERO, "lightning.pytorch.accelerators.cuda"}


def test_quiet_is_harmless_twice(environment: dict[str, str]) -> None:
    """Each CLI run in a process installs it again: the loggers keep one filter each."""
    quiet_third_party()
    before = list(logging.getLogger(RANK_ZERO).filters)
    quiet_third_party()
    assert logging.getLogger(RANK_ZERO).filters == before


def test_internal_warnings_go_warnings_about_the_run_stay(environment: dict[str, str]) -> None:
    """Lightning's own deprecations and advice that does not fit go; a warning about the user's config or files
    stays."""
    noise = [
        ("`isinstance(treespec, LeafSpec)` is deprecated, use `TreeSpec.is_leaf()` instead.", FutureWarning),
        ("The 'train_dataloader' does not have many workers which may be a bottleneck.", PossibleUserWarning),
        (
            "Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be provided: [x]",
            UserWarning,
        ),
        ("No seed found, seed set to 0", UserWarning),
    ]
    kept = [
        ("Checkpoint directory run/checkpoints exists and is not empty.", UserWarning),
        ("The number of training batches (3) is smaller than the logging interval", PossibleUserWarning),
        ("`max_epochs` was not set. Setting it to 1000 epochs.", PossibleUserWarning),
        ("something else is deprecated", FutureWarning),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_third_party()
        for message, category in noise + kept:
            warnings.warn(message, category, stacklevel=1)
    assert [str(w.message) for w in caught] == [message for message, _ in kept]


@pytest.mark.parametrize("tty", [False, True])
def test_environment_defaults_yield_to_the_user(
    environment: dict[str, str], monkeypatch: pytest.MonkeyPatch, tty: bool
) -> None:
    """W&B's panels are off unless the user says otherwise; `datasets` bars are off only when stderr is a file."""
    monkeypatch.setattr(sys, "stderr", Terminal(tty))
    environment["WANDB_QUIET"] = "false"
    quiet_third_party()
    assert environment["WANDB_QUIET"] == "false"
    assert ("HF_DATASETS_DISABLE_PROGRESS_BARS" in environment) is not tty
    environment.pop("WANDB_QUIET")
    quiet_third_party()
    assert environment["WANDB_QUIET"] == "true"


@pytest.mark.parametrize(
    ("strategy", "quiet"),
    [(SingleDeviceStrategy("cpu"), True), (DDPStrategy(), True), (FSDPStrategy(), False)],
    ids=["one device", "ddp", "fsdp"],
)
def test_the_averaging_sharding_warning_goes_where_nothing_is_sharded(strategy: object, quiet: bool) -> None:
    """WeightAveraging's "doesn't support sharding" line is dropped on one device and under DDP, kept under FSDP;
    other warnings stay either way."""
    averaging = (
        "You're using the WeightAveraging callback with a model that overrides the configure_model callback. "
        "WeightAveraging doesn't support sharding model layers, so you may run out of memory."
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_unsharded_averaging(strategy)
        for message in (averaging, "Checkpoint directory run/checkpoints exists and is not empty."):
            warnings.warn(message, UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ([] if quiet else [averaging]) + [
        "Checkpoint directory run/checkpoints exists and is not empty."
    ]
