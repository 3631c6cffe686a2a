"""Option mistakes, in fresh processes through the installed script: each is one `error:` line that names the option
and the way out (no traceback, exit code 2), and those a fit can catch from its options alone stop before any
tokenizer is trained or store built. (Every refusal's wording, row by row: tests/test_option_errors.py; here one
mistake per command that checks options before its expensive work, and the resumed-architecture refusal.)"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.processes import failing, write_yaml
from tests.promises.conftest import Reference
from tests.promises.tasks import tiny_task_config
from tests.tasks.instruction_tuning.conftest import qwen2_folder

pytestmark = pytest.mark.slow  # each row starts the installed script (seconds of imports on 2 cores)
Args = Callable[[Path], list[str]]  # the mistake's arguments, given the test's folder


def nothing_built(run: Path, cache: Path) -> None:
    """No tokenizer in the run folder, no store in the cache: the mistake came before any expensive work."""
    assert not (run / "tokenizer").exists(), sorted(p.name for p in run.iterdir())
    built = sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) if cache.exists() else []
    assert not [p for p in built if "store" in p or p.endswith("manifest.json")], built


def lora_options_without_a_rank(root: Path) -> list[str]:
    """Issue 62: LoRA options beside rank 0 on a Hugging Face base ran a full fine-tune without a word."""
    return [
        "--model.init_from",
        str(qwen2_folder(root / "qwen2")),
        "--model.lora.rank",
        "0",
        "--model.lora.alpha",
        "32",
    ]


def test_a_fit_refuses_lora_options_without_a_rank_before_any_expensive_work(tmp_path: Path) -> None:
    """A fit refuses the mistake in one line, naming the option, before it trains a tokenizer or builds a store."""
    words = ("--model.lora.alpha 32", "--model.lora.rank is 0", "--model.lora.rank 8")
    refused_early("fit", "instruction_tuning", lora_options_without_a_rank, words, tmp_path)


def test_prepare_refuses_a_missing_init_from_before_any_expensive_work(tmp_path: Path) -> None:
    """`prepare` (which builds the tokenizer and stores a fit reads) checks --model.init_from first too."""
    mistake = lambda root: ["--model.init_from", str(root / "no-such-model")]  # noqa: E731
    refused_early(
        "prepare", "text_classification", mistake, ("--model.init_from", "no-such-model: no such file"), tmp_path
    )


def refused_early(command: str, task: str, mistake: Args, words: tuple[str, ...], tmp_path: Path) -> None:
    """`command -c CONFIG MISTAKE` ends in one error line holding `words`, with nothing built."""
    run, cache = tmp_path / "run", tmp_path / "cache"
    config = write_yaml(tmp_path / "config.yaml", tiny_task_config(task, tmp_path / "data", run))
    said = failing(command, "-c", config, *mistake(tmp_path), cache_dir=cache)
    assert said.count("error:") == 1 and all(word in said for word in words), said
    nothing_built(run, cache)


@pytest.mark.parametrize("task", ["text_classification"])  # on the worker that holds its reference
def test_a_resumed_run_refuses_another_architecture(
    task: str, reference: Callable[[str], Reference], tmp_path: Path
) -> None:
    """Issue 62: `fit --ckpt_path CKPT --model.arch.d_model 64` on a d_model 32 checkpoint dropped the override
    without a word (a path) or died loading mismatched weights (`last`): one line naming it and --model.init_from.
    (On a copy of the task's reference run.)"""
    ref = reference(task)
    run = tmp_path / "run"
    shutil.copytree(ref.last.parents[1], run)
    path = write_yaml(tmp_path / "config.yaml", ref.config(run))
    ckpt = run / "checkpoints" / "last.ckpt"
    for given in (ckpt, "last"):
        said = failing(
            "fit", "-c", path, "--ckpt_path", given, "--model.arch.d_model", "64", cache_dir=tmp_path / "cache"
        )
        assert "--model.arch.d_model 64 (the checkpoint's: 32)" in said, said
        assert "comes from its checkpoint" in said and f"--model.init_from {ckpt}" in said, said
