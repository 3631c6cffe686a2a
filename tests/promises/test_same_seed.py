"""Same seed = same weights: one config fitted twice, in fresh processes through the installed `tetraformer` script,
each with its own empty cache dir, gives torch.equal weights and optimizer state, for every task.

The two fits run at once, so each times its kernel choices while the other loads the machine: what timing picks
must not change a number (accel/numerics.py). The peak MFU is taken against is measured in both (`peak_tflops:
auto`): measuring draws nothing from the run's random stream.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.processes import differing, killed_after, tetraformer, write_yaml
from tests.promises.tasks import TASKS, tiny_task_config

pytestmark = pytest.mark.slow

CASES = [(task, "32-true") for task in TASKS] + [("text_classification", "bf16-mixed")]


def fit_twice(tmp_path: Path, task: str, precision: str, envs: tuple[dict[str, str], dict[str, str]]) -> list[Path]:
    """Fit the task's tiny config in two fresh processes at once, each with its own empty cache dir and `envs`
    entry; the two last.ckpt paths."""
    data = tmp_path / "data"

    def fit(i: int) -> Path:
        run = tmp_path / f"run{i}"
        overrides: dict[str, Any] = {"trainer": {"precision": precision}, "run": {"peak_tflops": "auto"}}
        config = write_yaml(tmp_path / f"config{i}.yaml", tiny_task_config(task, data, run, **overrides))
        tetraformer("fit", "--config", config, cache_dir=tmp_path / f"cache{i}", env=envs[i])
        return run / "checkpoints" / "last.ckpt"

    tiny_task_config(task, data, tmp_path / "unused")  # the fixture files, written once before both runs read them
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(fit, range(2)))


@pytest.mark.parametrize(("task", "precision"), CASES, ids=[f"{t}-{p}" for t, p in CASES])
def test_same_seed_same_weights(tmp_path: Path, task: str, precision: str) -> None:
    """Two cold-cache fits of one config: every weight and AdamW moment equal to the bit."""
    first, second = fit_twice(tmp_path, task, precision, ({}, {}))
    assert differing(first, second) == []


def test_the_check_sees_another_kernel(tmp_path: Path) -> None:
    """Negative control: the same config on two attention kernels (what timing used to pick between) gives other
    weights, so the comparison above can fail. (Not math: with dropout on, SDPA's CPU dispatch is its math kernel.)"""
    envs = ({"TETRAFORMER_ATTENTION": "sdpa"}, {"TETRAFORMER_ATTENTION": "eager"})
    first, second = fit_twice(tmp_path, "language_modeling", "32-true", envs)
    assert any(name.startswith("weight/") for name in differing(first, second))


def test_a_resume_computes_with_the_kernels_its_checkpoint_names(tmp_path: Path) -> None:
    """A fit on TETRAFORMER_ATTENTION=eager, killed (-9) after its first checkpoint and resumed in a shell without
    the variable, takes eager from the checkpoint: every weight and moment equal to the straight eager run's.
    (Resumed on SDPA, as a resume that ignored the checkpoint would, the weights differ: the control above.)"""
    data, eager = tmp_path / "data", {"TETRAFORMER_ATTENTION": "eager"}
    paths = {}
    for name in ("straight", "resumed"):
        config = tiny_task_config("language_modeling", data, tmp_path / name, trainer={"precision": "32-true"})
        paths[name] = write_yaml(tmp_path / f"{name}.yaml", config)
    tetraformer("fit", "--config", paths["straight"], cache_dir=tmp_path / "cache0", env=eager)
    last = tmp_path / "resumed" / "checkpoints" / "last.ckpt"
    killed_after("fit", "--config", paths["resumed"], cache_dir=tmp_path / "cache1", ready=last.is_file, env=eager)
    tetraformer("fit", "--config", paths["resumed"], "--ckpt_path", "last", cache_dir=tmp_path / "cache2")
    assert differing(tmp_path / "straight" / "checkpoints" / "last.ckpt", last) == []
