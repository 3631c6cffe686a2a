"""A training process killed with SIGKILL at a random step resumes from last.ckpt to the uninterrupted weights."""

from __future__ import annotations

import random
from pathlib import Path

from tests.training.resume_runs import (
    STEPS,
    checkpoint,
    fit,
    killed_run,
    paced,
    same_weights,
    write_config,
)


def test_run_killed_at_a_random_step_resumes_to_the_same_weights(uninterrupted: Path, tmp_path: Path) -> None:
    """`kill -9` of `python -m tetraformer.cli fit` saving every step, then `fit --ckpt_path last` to the end."""
    at_least = random.randint(2, STEPS - 6)
    run = tmp_path / "run"
    release = tmp_path / "killed"
    config = write_config(tmp_path, run, **paced(release))
    killed_at = killed_run(config, run, at_least, release, tmp_path / "killed.log")
    assert at_least <= killed_at < STEPS
    fit(config, "--ckpt_path", "last")
    assert checkpoint(run)["global_step"] == STEPS
    assert same_weights(run, uninterrupted), f"killed after step {killed_at}"
