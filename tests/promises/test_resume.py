"""Exact resume and same seed = same weights, for every task, in fresh processes: a fit of the task's reference
config on an empty cache dir of its own, killed with SIGKILL at a random moment after its first periodic checkpoint
and resumed with `fit --ckpt_path last`, ends with every weight and optimizer tensor equal (torch.equal) to the
reference run, which never stopped and filled another empty cache. The two runs timed their kernel choices apart,
each while the machine was busy with other tests, so one check proves both promises."""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.processes import differing, killed_after, tetraformer, write_yaml
from tests.promises.conftest import LAST, Reference
from tests.promises.tasks import SAVE_EVERY, STEPS, TASKS
from tests.training.resume_runs import paced

pytestmark = pytest.mark.slow
KILL_WITHIN_S = 1.0  # the kill lands this long at most after the first last.ckpt (the run is held at step 18)


def killed(config: dict[str, Any], base: Path, name: str, cache: Path) -> tuple[Path, int]:
    """Run `config` (paced) as run `name` in `base` on `cache`, killed with SIGKILL at a random moment after its first
    periodic last.ckpt: the config's path and the step its last.ckpt holds."""
    release = base / f"{name}.release"
    config["trainer"].setdefault("callbacks", []).extend(paced(release)["callbacks"])
    path = write_yaml(base / f"{name}.yaml", config)
    last = base / name / LAST
    kill_at: list[float] = []

    def ready() -> bool:
        if not kill_at and last.is_file():
            kill_at.append(time.monotonic() + random.uniform(0, KILL_WITHIN_S))
        return bool(kill_at) and time.monotonic() >= kill_at[0]

    killed_after("fit", "-c", path, cache_dir=cache, ready=ready)
    release.touch()  # a resumed run is not held
    return path, torch.load(last, map_location="cpu", weights_only=False)["global_step"]


def killed_and_resumed(ref: Reference, name: str, lose_position: bool = False) -> tuple[Path, int]:
    """The reference's config as run `name` on a new empty cache, killed after its first checkpoint and resumed (with
    `lose_position`, from a checkpoint stripped of its training loader's position): its last.ckpt and the kill step."""
    cache = ref.base / f"cache-{name}"
    config, step = killed(ref.config(ref.base / name), ref.base, name, cache)
    last = ref.base / name / LAST
    if lose_position:
        checkpoint = torch.load(last, map_location="cpu", weights_only=False)
        assert checkpoint["loops"]["fit_loop"]["state_dict"].pop("combined_loader"), "no loader position to drop"
        torch.save(checkpoint, last)
    tetraformer("fit", "-c", config, "--ckpt_path", "last", cache_dir=cache)
    return last, step


@pytest.mark.parametrize("task", TASKS)
def test_killed_run_on_a_cold_cache_resumes_to_the_reference_weights(
    task: str, reference: Callable[[str], Reference], tmp_path: Path
) -> None:
    """kill -9 mid-run, `fit --ckpt_path last` in a new process, another empty cache: every tensor as the reference."""
    ref = reference(task)
    last, step = killed_and_resumed(ref, "killed")
    assert SAVE_EVERY <= step < STEPS
    assert differing(ref.last, last) == [], f"{task}, killed after step {step}"
    # the check can fail: one optimizer moment one float step away is the one tensor it names
    nudged = nudge(last, tmp_path / "nudged.ckpt")
    assert differing(ref.last, tmp_path / "nudged.ckpt") == [nudged]


@pytest.mark.parametrize("task", ["text_classification"])  # on the worker that holds its reference
def test_a_resume_that_loses_the_data_position_is_caught(task: str, reference: Callable[[str], Reference]) -> None:
    """Negative control: resumed from a checkpoint without its training loader's position (the epoch starts again at
    its first batch, as resumes of epoch-bounded runs once did), the run ends with other weights and moments."""
    ref = reference(task)
    last, step = killed_and_resumed(ref, "lost", lose_position=True)
    assert differing(ref.last, last), f"killed after step {step}"


def nudge(path: Path, out: Path) -> str:
    """Copy a checkpoint with its first Adam moment moved one float step up; the name `differing` gives it."""
    shutil.copyfile(path, out)
    checkpoint = torch.load(out, map_location="cpu", weights_only=False)
    param, state = next(iter(checkpoint["optimizer_states"][0]["state"].items()))
    state["exp_avg"] = torch.nextafter(state["exp_avg"], torch.full_like(state["exp_avg"], float("inf")))
    torch.save(checkpoint, out)
    return f"optimizer0/{param}/exp_avg"
