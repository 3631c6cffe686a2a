"""What a fit says is true, in fresh processes: "no validation ran" only when none did, and "starting fresh" for a
head only when the head does start fresh (not when a resumed fit's checkpoint replaces what init_from loaded)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.processes import tetraformer, write_yaml
from tests.promises.conftest import Reference
from tests.promises.tasks import STEPS, tiny_task_config

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("task", ["masked_lm"])]  # beside the masked LM's reference
NO_VALIDATION = "no validation ran"


def test_no_validation_is_said_only_when_none_ran(
    task: str, reference: Callable[[str], Reference], tmp_path: Path
) -> None:
    """A fit validated on its last step (the reference: at 10, 20 and the 24 it stops on, between two intervals) says
    nothing of the kind; one without validation says best.ckpt is last."""
    said = reference(task).said
    assert f"validation at step {STEPS}" in said and NO_VALIDATION not in said, said
    config = tiny_task_config("masked_lm", tmp_path / "data", tmp_path / "run", trainer={"max_steps": 4})
    unvalidated = {"trainer": {**config["trainer"], "limit_val_batches": 0}}
    fit = write_yaml(tmp_path / "fit.yaml", {**config, **unvalidated})
    said = tetraformer("fit", "-c", fit, cache_dir=tmp_path / "cache").stderr
    assert NO_VALIDATION in said and "validation at step" not in said, said


def test_a_resumed_fit_does_not_say_its_head_starts_fresh(
    task: str, reference: Callable[[str], Reference], tmp_path: Path
) -> None:
    """A classifier from the masked LM says its head starts fresh; resumed from its own last.ckpt it does not."""
    model = {"init_from": str(reference(task).last)}
    config = tiny_task_config("text_classification", tmp_path / "data", tmp_path / "run", model=model)
    config["trainer"]["max_steps"] = 8
    fit, cache = write_yaml(tmp_path / "fit.yaml", config), tmp_path / "cache"
    said = tetraformer("fit", "-c", fit, cache_dir=cache).stderr
    assert "starting fresh: head.classifier.bias, head.classifier.weight" in said, said
    said = tetraformer("fit", "-c", fit, "--ckpt_path", "last", "--trainer.max_steps", "12", cache_dir=cache).stderr
    assert "Restored all states" in said and "starting fresh" not in said and "initialised" not in said, said
