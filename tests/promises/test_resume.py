"""Exact resume, same seed = same weights and data that cannot change under a run, for every task, in fresh
processes through the installed `tetraformer` script.

The task's reference config, run again on an empty cache dir of its own, is killed with SIGKILL at a random moment
after its first periodic checkpoint (tests/promises/conftest.py `killed`). With its training data changed (same size,
other content), `fit --ckpt_path last` stops in one line before any work and leaves the run's tokenizer and
checkpoints as they were. With the data's bytes put back (a new modification time, the same content) the resume goes
on, and ends with every weight and optimizer tensor equal (torch.equal) to the reference run, which never stopped and
filled another empty cache. The two runs timed their kernel choices apart, each while the machine was busy with other
tests, so one check proves exact resume, cache-free numbers, and a refusal that loses nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.processes import differing, failing, tetraformer, write_yaml
from tests.promises.conftest import LAST, Killed, Reference
from tests.promises.tasks import SAVE_EVERY, STEPS, TASKS
from tests.training.resume_runs import paced

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("task", TASKS)
def test_a_killed_run_refuses_changed_data_then_resumes_to_the_reference_weights(
    task: str, reference: Callable[[str], Reference], killed: Callable[[str], Killed], tmp_path: Path
) -> None:
    """kill -9 mid-run; changed data stops `fit --ckpt_path last` in one line, touching nothing; the same bytes back,
    the resume in a new process, on another empty cache than the reference's, ends with every tensor as the
    reference's."""
    ref, run = reference(task), killed(task)
    resume: list[Any] = ["fit", "-c", run.config, "--ckpt_path", "last"]
    before = run_files(run.run)
    assert any(name.startswith("checkpoints/") for name in before)
    with changed(training_file(ref)):
        said = failing(*resume, cache_dir=run.cache)
    assert said.startswith("error: ") and "\n" not in said
    assert "differs in content since" in said and "--data.allow_changed_data true" in said
    assert run_files(run.run) == before  # the run's tokenizer and checkpoints untouched

    done = tetraformer(*resume, cache_dir=run.cache)  # the same content, touched: it resumes as it is
    assert "differs in content" not in done.stderr
    # what init_from loaded is said when it is loaded (the BERT folder's classifier starts fresh), not on a resume,
    # whose checkpoint replaces it
    assert "Restored all states" in done.stderr and "initialised" not in done.stderr, done.stderr[-3000:]
    assert "starting fresh" not in done.stderr and "starting fresh" not in said
    if task == "text_classification":
        assert "starting fresh: head.classifier.bias, head.classifier.weight" in ref.said, ref.said[-3000:]
    assert SAVE_EVERY <= run.step < STEPS
    assert differing(ref.last, run.run / LAST) == [], f"{task}, killed after step {run.step}"
    # the check can fail: one optimizer moment one float step away is the one tensor it names
    nudged = nudge(run.run / LAST, tmp_path / "nudged.ckpt")
    assert differing(ref.last, tmp_path / "nudged.ckpt") == [nudged]


@pytest.mark.parametrize("task", ["text_classification"])  # on the worker that holds its reference
def test_a_resume_that_loses_the_data_position_is_caught(
    task: str, reference: Callable[[str], Reference], killed: Callable[[str], Killed]
) -> None:
    """Negative control: resumed from the killed run's checkpoint without its training loader's position (the epoch
    starts again at its first batch, as resumes of epoch-bounded runs once did), the run ends with other weights."""
    ref, run = reference(task), killed(task)
    lost = ref.base / "lost"
    shutil.copytree(run.copy, lost)
    checkpoint = torch.load(lost / LAST, map_location="cpu", weights_only=False)
    assert checkpoint["loops"]["fit_loop"]["state_dict"].pop("combined_loader"), "no loader position to drop"
    torch.save(checkpoint, lost / LAST)
    options = ref.config(lost)
    options["trainer"].setdefault("callbacks", []).extend(paced(ref.base / "killed.release")["callbacks"])  # as run
    config = write_yaml(ref.base / "lost.yaml", options)
    tetraformer("fit", "-c", config, "--ckpt_path", "last", cache_dir=run.cache)
    assert differing(ref.last, lost / LAST), f"killed after step {run.step}"


def training_file(ref: Reference) -> Path:
    """The file the reference trains on: its training file, or an image of its training folder."""
    train = Path(ref.data["train_path"])
    return sorted(train.rglob("*.png"))[0] if train.is_dir() else train


@contextmanager
def changed(path: Path) -> Iterator[None]:
    """Within the block, `path`'s content changed at its size (`edit_keeping_size`); after it, every byte put back."""
    folder = path.parent.parent if path.suffix == ".png" else path.parent
    kept = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    edit_keeping_size(path)
    try:
        yield
    finally:
        for p, data in kept.items():
            p.write_bytes(data)


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


def nudge(path: Path, out: Path) -> str:
    """Copy a checkpoint with its first Adam moment moved one float step up; the name `differing` gives it."""
    shutil.copyfile(path, out)
    checkpoint = torch.load(out, map_location="cpu", weights_only=False)
    param, state = next(iter(checkpoint["optimizer_states"][0]["state"].items()))
    state["exp_avg"] = torch.nextafter(state["exp_avg"], torch.full_like(state["exp_avg"], float("inf")))
    torch.save(checkpoint, out)
    return f"optimizer0/{param}/exp_avg"
