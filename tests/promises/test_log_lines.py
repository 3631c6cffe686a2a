"""What a fit says is true, in fresh processes: "no validation ran" only when none did (a fit without validation
says it: tests/promises/test_precision.py). That "starting fresh" is said for a head only when the head does start
fresh, not when a resumed fit's checkpoint replaces what init_from loaded, is checked on every task's resume
(tests/promises/test_resume.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.promises.conftest import Reference
from tests.promises.tasks import STEPS

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("task", ["masked_lm"])]  # beside the masked LM's reference
NO_VALIDATION = "no validation ran"


def test_no_validation_is_not_said_when_one_ran(task: str, reference: Callable[[str], Reference]) -> None:
    """A fit validated on its last step (the reference: at 10, 20 and the 24 it stops on, between two intervals) says
    nothing of the kind."""
    said = reference(task).said
    assert f"validation at step {STEPS}" in said and NO_VALIDATION not in said, said
