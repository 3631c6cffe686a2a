"""What a fit says is true, in fresh processes: "no validation ran" only when none did, and "starting fresh" for a
head only when the head does start fresh (not when a resumed fit's checkpoint replaces what init_from loaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import tetraformer, write_yaml
from tests.promises.tasks import tiny_task_config

pytestmark = pytest.mark.slow
STEPS = 8  # between two validation intervals (10): the only validation is the one on the step training stops on
NO_VALIDATION = "no validation ran"


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A masked-LM run whose one validation comes on its last step: (its last.ckpt, what the fit logged)."""
    root = tmp_path_factory.mktemp("mlm")
    config = tiny_task_config("masked_lm", root / "data", root / "run", trainer={"max_steps": STEPS})
    done = tetraformer("fit", "-c", write_yaml(root / "fit.yaml", config), cache_dir=root / "cache")
    return root / "run" / "checkpoints" / "last.ckpt", done.stderr


def test_no_validation_is_said_only_when_none_ran(pretrained: tuple[Path, str], tmp_path: Path) -> None:
    """A fit validated on its last step says nothing of the kind; one without validation says best.ckpt is last."""
    _, said = pretrained
    assert "validation at step 8" in said and NO_VALIDATION not in said, said
    config = tiny_task_config("masked_lm", tmp_path / "data", tmp_path / "run", trainer={"max_steps": 4})
    unvalidated = {"trainer": {**config["trainer"], "limit_val_batches": 0}}
    fit = write_yaml(tmp_path / "fit.yaml", {**config, **unvalidated})
    said = tetraformer("fit", "-c", fit, cache_dir=tmp_path / "cache").stderr
    assert NO_VALIDATION in said and "validation at step" not in said, said


def test_a_resumed_fit_does_not_say_its_head_starts_fresh(pretrained: tuple[Path, str], tmp_path: Path) -> None:
    """A classifier from the masked LM says its head starts fresh; resumed from its own last.ckpt it does not."""
    source, _ = pretrained
    model = {"init_from": str(source)}
    config = tiny_task_config("text_classification", tmp_path / "data", tmp_path / "run", model=model)
    config["trainer"]["max_steps"] = STEPS
    fit, cache = write_yaml(tmp_path / "fit.yaml", config), tmp_path / "cache"
    said = tetraformer("fit", "-c", fit, cache_dir=cache).stderr
    assert "starting fresh: head.classifier.bias, head.classifier.weight" in said, said
    said = tetraformer("fit", "-c", fit, "--ckpt_path", "last", "--trainer.max_steps", "12", cache_dir=cache).stderr
    assert "Restored all states" in said and "starting fresh" not in said and "initialised" not in said, said
