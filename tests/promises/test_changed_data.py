"""Data changed before a resume, the way on: `--data.allow_changed_data true` goes on with the run's own tokenizer,
in a fresh process through the installed `tetraformer` script. (That a resume without it stops in one line before any
work, for every task, and that the same content touched resumes as it is, is proven on the killed runs of
tests/promises/test_resume.py.)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.processes import tetraformer, write_yaml
from tests.promises.conftest import Reference
from tests.promises.tasks import STEPS, write_task_data
from tests.promises.test_resume import edit_keeping_size, run_files

pytestmark = pytest.mark.slow

RESUMED_STEPS = STEPS + 2  # a resume trains two steps past the reference run's end


@pytest.mark.parametrize("task", ["language_modeling"])  # a task that trains its own tokenizer, beside its reference
def test_allowed_changed_data_goes_on_with_the_runs_tokenizer(
    tmp_path: Path, task: str, reference: Callable[[str], Reference]
) -> None:
    """A copy of the reference run, its data rewritten elsewhere and then changed: with the option the resume goes on,
    says so, and neither retrains nor replaces the run's tokenizer."""
    ref = reference(task)
    shutil.copytree(ref.last.parents[1], tmp_path / "run")
    data = write_task_data(task, tmp_path / "data")  # the same content at another path is the same data
    config = write_yaml(tmp_path / "config.yaml", ref.config(tmp_path / "run", data=data))
    before = run_files(tmp_path / "run")
    edit_keeping_size(Path(data["train_path"]))
    resume: list[Any] = ["fit", "-c", config, "--ckpt_path", "last", "--trainer.max_steps", RESUMED_STEPS]
    done = tetraformer(*resume, "--data.allow_changed_data", "true", cache_dir=tmp_path / "cache")
    assert "--data.allow_changed_data" in done.stderr and "is not the tokenizer" not in done.stderr
    assert "retraining the tokenizer" not in done.stderr
    tokenizer = {
        name: data for name, data in run_files(tmp_path / "run").items() if not name.startswith("checkpoints/")
    }
    assert tokenizer and tokenizer == {
        name: data for name, data in before.items() if not name.startswith("checkpoints/")
    }
