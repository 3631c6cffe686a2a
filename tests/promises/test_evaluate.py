"""`tetraformer evaluate` from the checkpoint alone, in a fresh process: the chat reference (LoRA on a Qwen2 folder)
scores on local multiple-choice and rolling-loglikelihood tasks what lm-eval's own `hf` model scores on its export.

The export is `convert to-hf`'s function run in-process (the fresh export process is test_checkpoint_commands.py's);
lm-eval's `hf` model reads it with its defaults, as `--model hf --model_args pretrained=EXPORT` would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.evaluation.harness_tasks import CHOICE, TEXT, write_tasks
from tests.processes import tetraformer
from tests.promises.conftest import Reference
from tetraformer.cli.export import export_checkpoint
from tetraformer.evaluation.harness import run_harness, task_manager
from tetraformer.evaluation.scores import harness_scores, read_scores


@pytest.mark.slow
@pytest.mark.parametrize("task", ["instruction_tuning"])
def test_evaluate_scores_what_lm_eval_scores_on_the_export(
    reference: Callable[[str], Reference], task: str, tmp_path: Path
) -> None:
    """Accuracy (and its stderr) equal, perplexities within 1e-4 of each other's relative size."""
    from lm_eval.models.huggingface import HFLM  # here: importing it costs every test worker's collection

    ref = reference(task)
    tasks = write_tasks(tmp_path / "tasks")
    out = tmp_path / "scores.json"
    args = ["--tasks", f"{CHOICE},{TEXT}", "--include_path", tasks, "--output", out, "--batch_size", "4"]
    tetraformer("evaluate", "--ckpt", ref.alone, *args, cache_dir=tmp_path / "cache")
    export = export_checkpoint(ref.alone, tmp_path / "export")
    hf = HFLM(pretrained=str(export), device="cpu", batch_size=4)
    expected = harness_scores(run_harness(hf, [CHOICE, TEXT], task_manager([CHOICE, TEXT], tasks, builtin=False)))
    saved = read_scores(out)
    assert saved[CHOICE] == expected[CHOICE] and saved[CHOICE]["acc"]["stderr"] > 0
    for metric, cell in expected[TEXT].items():
        assert saved[TEXT][metric]["value"] == pytest.approx(cell["value"], rel=1e-4), metric
