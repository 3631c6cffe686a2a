"""lm-eval on a checkpoint's own network scores what lm-eval's `hf` model scores on the checkpoint's export.

One tiny random causal-LM checkpoint (tests/evaluation/harness_tasks.py), exported in-process as `convert to-hf` does;
lm-eval's HFLM runs on the export once per module with its default settings (the export's tokenizer encodes text
plainly, as training and `generate` do: interop/convert.py's plain_text_encoding).
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
import transformers

from tests.evaluation.harness_tasks import CHOICE, CONTINUE, NEW_TOKENS, TEXT, tiny_checkpoint, write_tasks
from tetraformer.cli import main
from tetraformer.cli.export import export_checkpoint
from tetraformer.evaluation.checkpoint_lm import CheckpointLM
from tetraformer.evaluation.harness import run_harness, task_manager
from tetraformer.evaluation.scores import harness_scores
from tetraformer.training.base.text_generation import TextGenerationConfig
from tetraformer.training.checkpointing.loading import load_task_module

if TYPE_CHECKING:
    from lm_eval.models.huggingface import HFLM

TASKS = [CHOICE, TEXT, CONTINUE]
BATCH = 3  # not a divisor of any task's request count: a short last batch of mixed lengths


class Made:
    """The checkpoint, its export, the task folder, and lm-eval's `hf` results on the export (log_samples)."""

    def __init__(self, root: Path) -> None:
        self.tasks = write_tasks(root / "tasks")
        self.ckpt = tiny_checkpoint(root)
        self.export = export_checkpoint(self.ckpt, root / "hf")
        self.manager = task_manager(TASKS, self.tasks, builtin=False)
        self.theirs = run_harness(hf_model(self.export), TASKS, self.manager, log_samples=True)


def hf_model(export: Path) -> HFLM:
    """lm-eval's `hf` model on the export, as `--model hf --model_args pretrained=EXPORT` runs it,
    but for one setting: the export's generation_config.json carries the task's max_new_tokens, which transformers'
    `generate` prefers to the max_length lm-eval passes (each request would decode 64 tokens instead of 8)."""
    from lm_eval.models.huggingface import HFLM  # here: importing it costs every test worker's collection

    model = transformers.AutoModelForCausalLM.from_pretrained(export).eval()
    model.generation_config.max_new_tokens = None
    tokenizer = transformers.AutoTokenizer.from_pretrained(export)
    return HFLM(pretrained=model, tokenizer=tokenizer, batch_size=BATCH, device="cpu")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    """Built once for the module."""
    return Made(tmp_path_factory.mktemp("harness"))


def responses(results: dict[str, Any], task: str) -> list[Any]:
    """Each request's response (a loglikelihood pair, a rolling loglikelihood or a text), in document order."""
    samples = sorted(results["samples"][task], key=lambda sample: sample["doc_id"])
    return [response[0] for sample in samples for response in sample["resps"]]


def global_rng() -> tuple[Any, ...]:
    """The global generators' states: Python's, NumPy's, torch's."""
    return random.getstate(), np.random.get_state()[1].tolist(), torch.get_rng_state()


def test_scores_and_loglikelihoods_equal_lm_evals_on_the_export(made: Made) -> None:
    """Multiple choice: every choice's loglikelihood within 1e-4 of HFLM's, the same greedy flags and the same
    accuracy; rolling loglikelihood: every document's within 1e-4, windows included; lm-eval's seeding leaves the
    global generators as they were."""
    lm = CheckpointLM(load_task_module(made.ckpt), BATCH)  # building the network draws from torch's generator
    before = global_rng()
    ours = run_harness(lm, [CHOICE, TEXT], made.manager, log_samples=True)
    after = global_rng()
    assert before[:2] == after[:2] and torch.equal(before[2], after[2])
    for task in (CHOICE, TEXT):
        mine, theirs = responses(ours, task), responses(made.theirs, task)
        assert len(mine) == len(theirs) == (80 if task == CHOICE else 4)
        if task == CHOICE:
            assert [greedy for _, greedy in mine] == [greedy for _, greedy in theirs]
            mine, theirs = [ll for ll, _ in mine], [ll for ll, _ in theirs]
        assert np.allclose(mine, theirs, rtol=0, atol=1e-4), (task, mine, theirs)
    scores, expected = harness_scores(ours), harness_scores(made.theirs)
    assert (
        scores[CHOICE]["acc"] == expected[CHOICE]["acc"] and scores[CHOICE]["acc_norm"] == expected[CHOICE]["acc_norm"]
    )
    for metric in ("word_perplexity", "byte_perplexity", "bits_per_byte"):
        assert scores[TEXT][metric]["value"] == pytest.approx(expected[TEXT][metric]["value"], rel=1e-4)


def test_generate_until_is_greedy_generate(made: Made) -> None:
    """The generation task's continuations are the checkpoint's greedy `generate` (8 tokens, cut at a newline) and
    HFLM's on the export."""
    task = load_task_module(made.ckpt)
    ours = run_harness(CheckpointLM(task, BATCH), [CONTINUE], made.manager, log_samples=True)
    prompts = [sample["arguments"][0][0] for sample in sorted(ours["samples"][CONTINUE], key=lambda s: s["doc_id"])]
    greedy = TextGenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, stop=["\n"])
    texts = responses(ours, CONTINUE)
    assert texts == task.generate(prompts, greedy)
    assert texts == responses(made.theirs, CONTINUE)
    assert any(text.strip() for text in texts)


@pytest.mark.slow  # runs the CLI (in-process)
def test_the_command_writes_the_scores_and_logs_their_table(
    made: Made, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`tetraformer evaluate` in-process: the results JSON holds each task's metrics with their stderr (HFLM's
    accuracy), and the log shows them as a table."""
    out = tmp_path / "scores.json"
    args = ["--ckpt", made.ckpt, "--tasks", f"{CHOICE},{TEXT}", "--include_path", made.tasks, "--output", out]
    with caplog.at_level(logging.INFO, logger="tetraformer"):
        main(["evaluate", *map(str, args), "--batch_size", "4", "--device", "cpu"])
    saved = json.loads(out.read_text(encoding="utf-8"))
    expected = harness_scores(made.theirs)
    assert saved["scores"][CHOICE] == expected[CHOICE] and saved["scores"][CHOICE]["acc"]["stderr"] > 0
    for metric, cell in expected[TEXT].items():  # perplexities: no stderr
        assert saved["scores"][TEXT][metric] == {"value": pytest.approx(cell["value"], rel=1e-4), "stderr": None}
    assert saved["samples"] == {CHOICE: 20, TEXT: 4} and saved["checkpoint"] == str(made.ckpt)
    assert f"| {CHOICE} | acc | {expected[CHOICE]['acc']['value']:.4f} |" in caplog.text
