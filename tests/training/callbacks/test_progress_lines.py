"""Progress lines: a fit whose output is not a terminal logs its progress, as often as `--run.progress_every_*` say."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from lightning.pytorch.callbacks import Timer

from tests.cli_runner import config_runner
from tests.tasks.language_modeling.conftest import tiny_config
from tests.training.tiny_lm import FIT_STEPS, corpus, train_losses
from tetraformer.errors import ConfigError
from tetraformer.training.callbacks.progress_lines import Mark, ProgressLines
from tetraformer.training.callbacks.throughput import Throughput

LOGGER = "tetraformer.training.callbacks.progress_lines"
STEP_LINE = re.compile(
    r"step (\d+)/6 \| epoch [\d.]+ \| loss ([\d.]+) \| lr [\d.e-]+ \| [\d,]+ tokens/s, [\d,.]+ samples/s"
    r" \| elapsed \d+:\d\d:\d\d \| ETA \d+:\d\d:\d\d$"
)


def unset_bar(root: Path, **data: Any) -> dict[str, Any]:
    """The tiny LM config with `trainer.enable_progress_bar` unset: the CLI decides (pytest's stdout is no tty)."""
    config = tiny_config(root, **data)
    del config["trainer"]["enable_progress_bar"]
    return config


def fit_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, *args: str
) -> tuple[list[str], Path]:
    """Fit the tiny LM for 6 steps (validating at 3 and 6) through the CLI; its progress lines and run dir."""
    run = config_runner(tmp_path, monkeypatch, unset_bar)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        root = run("fit", *FIT_STEPS, *args, train_path=str(corpus(tmp_path)), documents="line")
    return [r.getMessage() for r in caplog.records if r.name == LOGGER], root


@pytest.mark.slow
def test_a_fit_to_a_file_logs_steps_and_validations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every 2nd step a line with every field, its loss the mean of the steps since the last line (as metrics.csv
    has them); a line with the val metrics at each validation."""
    lines, root = fit_lines(tmp_path, monkeypatch, caplog, "--run.progress_every_n_steps", "2")
    steps = [STEP_LINE.match(line) for line in lines if line.startswith("step ")]
    assert all(steps), lines
    assert [int(m.group(1)) for m in steps] == [2, 4, 6]
    losses = train_losses(root)  # one per step: the tiny config writes every step
    assert len(losses) == 6
    means = [sum(losses[i : i + 2]) / 2 for i in (0, 2, 4)]
    assert [float(m.group(2)) for m in steps] == pytest.approx(means, abs=2e-4)
    validations = [line for line in lines if line.startswith("validation")]
    assert [line.split(":")[0] for line in validations] == ["validation at step 3", "validation at step 6"]
    assert all(re.search(r"val/loss [\d.]+ \| val/ppl [\d.]+", line) for line in validations), validations


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "expected_steps", "validations"),
    [
        (["--run.progress_every_n_steps", "3"], [3, 6], 2),
        (["--run.progress_every_n_steps", "0", "--run.progress_every_s", "1e-9"], [1, 2, 3, 4, 5, 6], 2),
        (["--run.progress_every_n_steps", "0", "--run.progress_every_s", "0"], [], 0),
        (["--trainer.enable_progress_bar", "true"], [], 0),  # a bar asked for: no lines beside it
    ],
    ids=["every-3-steps", "every-step-by-time", "off", "bar"],
)
def test_the_options_set_how_often(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    options: list[str],
    expected_steps: list[int],
    validations: int,
) -> None:
    """Steps divisible by N, or every step once a period shorter than a step passed; 0 and 0: none at all."""
    lines, _ = fit_lines(tmp_path, monkeypatch, caplog, *options)
    steps = [int(line.split()[1].split("/")[0]) for line in lines if line.startswith("step ")]
    assert steps == expected_steps, lines
    assert sum(line.startswith("validation") for line in lines) == validations


@pytest.mark.parametrize("option", ["every_n_steps", "every_s"])
def test_a_negative_period_is_a_config_error(option: str) -> None:
    """-1 is refused in one line naming the option; 0 is the way to say none."""
    periods: dict[str, Any] = {"every_n_steps": 10, "every_s": 10.0, option: -1}
    with pytest.raises(ConfigError, match=rf"--run.progress_{option} must be >= 0 \(0 or null: none\), got -1"):
        ProgressLines(counter=Throughput(), **periods)


class FixedTimer(Timer):
    """A --trainer.max_time timer with a given number of seconds left."""

    def __init__(self, remaining: float) -> None:
        super().__init__(duration={"seconds": 3600})
        self.remaining = remaining

    def time_remaining(self, *args: Any, **kwargs: Any) -> float:
        return self.remaining


@pytest.mark.parametrize(
    ("max_tokens", "timer", "expected"),
    [(None, None, 90.0), (500, None, 40.0), (500, FixedTimer(5.0), 5.0), (None, FixedTimer(1000.0), 90.0)],
    ids=["steps", "tokens-nearer", "time-nearest", "steps-nearer-than-time"],
)
def test_the_eta_is_the_nearest_bound(max_tokens: int | None, timer: Timer | None, expected: float) -> None:
    """10 s for 10 of 100 steps and 100 tokens: 90 s by steps, 40 s to 500 tokens, or what max_time leaves."""
    counter = Throughput()
    lines = ProgressLines(10, None, counter=counter, max_tokens=max_tokens)
    bounds = {"estimated_stepping_batches": 100, "max_steps": 100, "max_epochs": -1}
    trainer = SimpleNamespace(global_step=0, callbacks=[timer] if timer else [], **bounds)
    lines.on_train_start(trainer, None)  # type: ignore[arg-type]
    start = Mark.now(trainer, counter)  # type: ignore[arg-type]
    later = replace(start, time=start.time + 10, step=10, tokens=100)
    assert lines._eta(trainer, later) == pytest.approx(expected, abs=0.01)  # type: ignore[arg-type]
