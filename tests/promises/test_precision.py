"""`--trainer.precision auto`, in fresh processes through the installed script: a fit says in one line which precision
this machine runs natively and trains in it; resumed on a machine without bf16 (oneDNN capped at AVX2), it keeps
the precision its checkpoint trained in, so moving a run never changes its numerics unasked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.processes import tetraformer, write_yaml
from tests.promises.tasks import tiny_task_config
from tests.promises.test_log_lines import NO_VALIDATION
from tetraformer.payload import PAYLOAD_KEY, PRECISION_KEY, read_checkpoint

pytestmark = pytest.mark.slow
CHOICE = re.compile(r"precision auto -> (\S+?)[:,]")
WITHOUT_BF16 = {"ONEDNN_MAX_CPU_ISA": "AVX2"}  # oneDNN runs its AVX2 kernels: a CPU without bf16, on any x86 CPU


def trained_in(run: Path) -> str:
    """The precision the run's last checkpoint records."""
    return read_checkpoint(run / "checkpoints" / "last.ckpt")[PAYLOAD_KEY][PRECISION_KEY]


def test_auto_says_its_choice_trains_and_a_resume_elsewhere_keeps_it(tmp_path: Path) -> None:
    """A 4-step fit with `precision: auto` logs one choice and records it; resumed where bf16 is missing, the run
    goes on in the recorded precision (a warning says what this machine alone would take, where that differs)."""
    run = tmp_path / "run"
    config = tiny_task_config(
        "text_classification", tmp_path / "data", run, trainer={"max_steps": 4, "precision": "auto"}
    )
    path = write_yaml(tmp_path / "config.yaml", config)
    first = tetraformer("fit", "-c", path, cache_dir=tmp_path / "cache")
    choices = CHOICE.findall(first.stderr)
    assert len(choices) == 1 and choices[0] in ("bf16-mixed", "32-true"), first.stderr[-3000:]
    assert "--trainer.precision" in next(line for line in first.stderr.splitlines() if "precision auto" in line)
    assert trained_in(run) == choices[0]

    resumed = tetraformer(
        "fit",
        "-c",
        path,
        "--ckpt_path",
        "last",
        "--trainer.max_steps",
        "8",
        cache_dir=tmp_path / "cache",
        env=WITHOUT_BF16,
    )
    assert CHOICE.findall(resumed.stderr) == choices, resumed.stderr[-3000:]
    said = next(line for line in resumed.stderr.splitlines() if "precision auto" in line)
    assert "trained in" in said and ("would take 32-true" in said) == (choices[0] == "bf16-mixed"), said
    assert trained_in(run) == choices[0]


def test_auto_without_bf16_takes_32_true(tmp_path: Path) -> None:
    """Where the CPU runs no bf16 (oneDNN capped at AVX2), `auto` trains in 32-true and says why. (The fit validates
    nowhere: it says so, and that best.ckpt is last; test_log_lines.py checks a validated fit does not.)"""
    run = tmp_path / "run"
    trainer = {"max_steps": 4, "precision": "auto", "limit_val_batches": 0}
    config = tiny_task_config("text_classification", tmp_path / "data", run, trainer=trainer)
    done = tetraformer(
        "fit", "-c", write_yaml(tmp_path / "c.yaml", config), cache_dir=tmp_path / "cache", env=WITHOUT_BF16
    )
    said = [line for line in done.stderr.splitlines() if "precision auto" in line]
    assert len(said) == 1 and "precision auto -> 32-true: this CPU has no bf16" in said[0], done.stderr[-3000:]
    assert trained_in(run) == "32-true"
    assert NO_VALIDATION in done.stderr and "validation at step" not in done.stderr, done.stderr[-3000:]
