"""Resume and same-seed promises for runs that start from a Hugging Face folder, with and without LoRA, in fresh
processes: one run goes straight through on its own empty cache; another, on another empty cache, is killed with
SIGKILL at a random moment after its first periodic checkpoint and resumed with `fit --ckpt_path last`. Both end
with every weight and optimizer tensor equal (torch.equal): exact resume and cache-independent numbers at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import differing, tetraformer, write_yaml
from tests.promises.conftest import LAST
from tests.promises.tasks import hf_folder, tiny_task_config
from tests.promises.test_resume import killed

LORA = {"rank": 4, "alpha": 8}
STARTS = {
    "hf": lambda folder: {"init_from": str(folder)},
    "lora": lambda folder: {"init_from": str(folder), "lora": LORA},
}


@pytest.mark.slow
@pytest.mark.parametrize("start", list(STARTS))
@pytest.mark.parametrize("task", ["instruction_tuning", "text_classification"])
def test_a_run_from_a_hugging_face_folder_resumes_to_a_cold_cache_runs_weights(
    task: str, start: str, tmp_path: Path
) -> None:
    """`--model.init_from HF_DIR` (and LoRA on it): kill -9 and resume equals a straight run on another cache."""
    model = STARTS[start](hf_folder(task, tmp_path))
    straight = tiny_task_config(task, tmp_path, tmp_path / "straight", model=model)
    tetraformer("fit", "-c", write_yaml(tmp_path / "straight.yaml", straight), cache_dir=tmp_path / "cache-a")
    run = tiny_task_config(task, tmp_path, tmp_path / "killed", model=model)
    config, step = killed(run, tmp_path, "killed", cache=tmp_path / "cache-b")
    tetraformer("fit", "-c", config, "--ckpt_path", "last", cache_dir=tmp_path / "cache-b")
    assert differing(tmp_path / "straight" / LAST, tmp_path / "killed" / LAST) == [], f"killed after step {step}"
