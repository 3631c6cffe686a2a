"""`tetraformer evaluate` options (tetraformer.cli.evaluate): mistakes are one line, before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetraformer.cli.evaluate import default_output, evaluate_main, limit_value, task_names
from tetraformer.errors import ConfigError


def test_task_names_split_on_commas_and_spaces_once_each() -> None:
    """`--tasks a,b c a` -> a, b, c; nothing named is an error."""
    assert task_names(["a,b", "c", "a,"]) == ["a", "b", "c"]
    with pytest.raises(ConfigError, match="--tasks: give at least one"):
        task_names([","])


def test_limit_is_a_count_or_a_share() -> None:
    """A whole number is a count (an int for lm-eval), below 1 a share; others are refused."""
    assert limit_value(20.0) == 20 and isinstance(limit_value(20.0), int) and limit_value(0.5) == 0.5
    assert limit_value(None) is None
    for wrong in (0.0, -1.0, 2.5):
        with pytest.raises(ConfigError, match="--limit"):
            limit_value(wrong)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--batch_size", "0"], "--batch_size 0: must be 1 or more"),
        (["--limit", "1.5"], "--limit 1.5: give a whole number"),
        (["--output", "."], "--output .: . is a folder"),
    ],
)
def test_option_mistakes_are_refused_before_loading(tmp_path: Path, extra: list[str], said: str) -> None:
    """The checkpoint is not even read (it does not exist here): the option's mistake is the error."""
    with pytest.raises(ConfigError, match=said):
        evaluate_main(["--ckpt", str(tmp_path / "none.ckpt"), "--tasks", "quiz", *extra])


def test_results_go_beside_the_checkpoint_by_default() -> None:
    """runs/a/checkpoints/last.ckpt -> runs/a/checkpoints/last.lm_eval.json."""
    assert default_output(Path("runs/a/checkpoints/last.ckpt")) == Path("runs/a/checkpoints/last.lm_eval.json")
