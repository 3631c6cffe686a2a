"""Same seed = same weights, the controls: what the seed fixes must be what sets the numbers, and the kernels a
checkpoint names are the kernels its resume computes with. (The promise itself, two fits of one config on two empty
cache dirs giving torch.equal weights and moments for every task, is proven by tests/promises/test_resume.py: the
killed-and-resumed run and the reference each filled an empty cache of their own.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.processes import differing, killed_after, tetraformer, write_yaml
from tests.promises.conftest import LAST, Reference

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("task", ["language_modeling"])]  # beside its reference
EAGER = {"TETRAFORMER_ATTENTION": "eager"}


@pytest.fixture(scope="module")
def eager(reference: Callable[[str], Reference]) -> tuple[Reference, Path]:
    """The language-model reference config fitted again on TETRAFORMER_ATTENTION=eager: the reference, its last.ckpt."""
    ref = reference("language_modeling")
    config = write_yaml(ref.base / "eager.yaml", ref.config(ref.base / "eager"))
    tetraformer("fit", "-c", config, cache_dir=ref.base / "cache-eager", env=EAGER)
    return ref, ref.base / "eager" / LAST


def test_the_check_sees_another_kernel(task: str, eager: tuple[Reference, Path]) -> None:
    """Negative control: the same config on another attention kernel (what timing used to pick between) gives other
    weights, so the comparison of the resume test can fail. (Not math: with dropout on, SDPA's CPU dispatch is its
    math kernel.)"""
    ref, last = eager
    assert any(name.startswith("weight/") for name in differing(ref.last, last))


def test_a_resume_computes_with_the_kernels_its_checkpoint_names(task: str, eager: tuple[Reference, Path]) -> None:
    """A fit on TETRAFORMER_ATTENTION=eager, killed (-9) after its first checkpoint and resumed in a shell without
    the variable, takes eager from the checkpoint: every weight and moment equal to the straight eager run's.
    (Resumed on SDPA, as a resume that ignored the checkpoint would, the weights differ: the control above.)"""
    ref, straight = eager
    config = write_yaml(ref.base / "eager-resumed.yaml", ref.config(ref.base / "eager-resumed"))
    last = ref.base / "eager-resumed" / LAST
    killed_after("fit", "--config", config, cache_dir=ref.base / "cache-er1", ready=last.is_file, env=EAGER)
    tetraformer("fit", "--config", config, "--ckpt_path", "last", cache_dir=ref.base / "cache-er2")
    assert differing(straight, last) == []
