"""Data changed before a resume: `fit --ckpt_path last` stops in one line, before any work, and leaves the run's
tokenizer and checkpoints as they were, for every task; `--data.allow_changed_data true` goes on, with the run's
tokenizer. Data whose content is the same (a file touched) resumes as it is. In fresh processes through the
installed `tetraformer` script (tests/processes.py).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.processes import failing, tetraformer, write_yaml
from tests.promises.conftest import Reference
from tests.promises.tasks import STEPS, TASKS, write_task_data

pytestmark = pytest.mark.slow

RESUMED_STEPS = STEPS + 2  # a resume trains two steps past the reference run's end


def fitted(ref: Reference, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the task's reference run and of its data in `tmp_path` (the same content elsewhere is the same data):
    the config that resumes it, and the file it trains on (the training file, or an image of the training folder)."""
    shutil.copytree(ref.last.parents[1], tmp_path / "run")
    data = write_task_data(ref.task, tmp_path / "data")
    config = write_yaml(tmp_path / "config.yaml", ref.config(tmp_path / "run", data=data))
    train = Path(data["train_path"])
    return config, (sorted(train.rglob("*.png"))[0] if train.is_dir() else train)


def edit_keeping_size(path: Path) -> None:
    """Change a file's content, not its size: records (lines, or blank-line separated blocks) in reverse order; an
    image swapped with one of another class (the folder's bytes the same in all)."""
    if path.suffix == ".png":
        other = next(p for p in sorted(path.parent.parent.rglob("*.png")) if p.parent != path.parent)
        mine, theirs = path.read_bytes(), other.read_bytes()
        path.write_bytes(theirs)
        other.write_bytes(mine)
        return
    text = path.read_text(encoding="utf-8")
    header, body = (text.split("\n", 1)[0] + "\n", text.split("\n", 1)[1]) if path.suffix == ".csv" else ("", text)
    separator = "\n\n" if path.suffix == ".conll" else "\n"
    records = body.rstrip("\n").split(separator)
    changed = header + separator.join(reversed(records)) + body[len(body.rstrip("\n")) :]
    if changed == text:  # every record alike (the language-model text): swap two letters of the first word
        changed = text.replace(text[:2], text[1::-1], 1)
    assert changed != text and len(changed.encode()) == len(text.encode())
    path.write_text(changed, encoding="utf-8")


def run_files(run: Path) -> dict[str, bytes]:
    """The bytes of the run's tokenizer files and checkpoints, by path."""
    found = [*run.glob("tokenizer/**/*"), *run.glob("checkpoints/*.ckpt")]
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(found) if p.is_file()}


@pytest.mark.parametrize("task", TASKS)
def test_changed_data_stops_a_resume_in_one_line(
    tmp_path: Path, task: str, reference: Callable[[str], Reference]
) -> None:
    config, train = fitted(reference(task), tmp_path)
    run, cache = tmp_path / "run", tmp_path / "cache"
    before = run_files(run)
    assert any(name.startswith("checkpoints/") for name in before)
    edit_keeping_size(train)
    resume: list[Any] = ["fit", "-c", config, "--ckpt_path", "last", "--trainer.max_steps", RESUMED_STEPS]
    said = failing(*resume, cache_dir=cache)
    assert said.startswith("error: ") and "\n" not in said
    assert "differs in content since" in said and "--data.allow_changed_data true" in said
    assert run_files(run) == before  # the run's tokenizer and checkpoints untouched
    done = tetraformer(*resume, "--data.allow_changed_data", "true", cache_dir=cache)
    assert "--data.allow_changed_data" in done.stderr and "is not the tokenizer" not in done.stderr
    assert "retraining the tokenizer" not in done.stderr
    tokenizer = {name: data for name, data in run_files(run).items() if not name.startswith("checkpoints/")}
    assert tokenizer == {name: data for name, data in before.items() if not name.startswith("checkpoints/")}


@pytest.mark.parametrize("task", ["language_modeling"])  # on the worker that holds its reference
def test_the_same_content_touched_resumes(tmp_path: Path, task: str, reference: Callable[[str], Reference]) -> None:
    config, train = fitted(reference(task), tmp_path)
    os.utime(train, (1, 1))  # another modification time, the same bytes
    resume = ["fit", "-c", config, "--ckpt_path", "last", "--trainer.max_steps", RESUMED_STEPS]
    done = tetraformer(*resume, cache_dir=tmp_path / "cache")
    assert "differs in content" not in done.stderr
