"""What `tetraformer evaluate` refuses, in one line each: a checkpoint lm-eval cannot score, a task name found
nowhere, a task whose data file is gone, and lm-eval itself missing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from lm_eval.models.dummy import DummyLM
from torch import nn

from tests.evaluation.harness_tasks import CHOICE, CONTINUE, TEXT, write_tasks
from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.evaluation import harness
from tetraformer.evaluation.harness import require_causal_lm, require_lm_eval, run_harness, task_manager


class Generating(SimpleNamespace):
    """A task module's stand-in: its network and the generation entry point CheckpointLM calls."""

    def continue_texts(self, inputs: list[str]) -> list[str]:
        """The inputs as they are."""
        return inputs


@pytest.mark.parametrize("family", ["seq2seq", "encoder", "image"])
def test_only_causal_language_models_are_scored(tiny_model: Callable[..., nn.Module], family: str) -> None:
    """Encoders, encoder-decoders and image models are refused, naming the checkpoint, its task and network."""
    with pytest.raises(TetraformerError, match=r"^run\.ckpt is a Generating checkpoint \(\w+\): lm-eval scores causal"):
        require_causal_lm(Generating(net=tiny_model(family)), "run.ckpt")
    require_causal_lm(Generating(net=tiny_model("causal")), "run.ckpt")
    with pytest.raises(TetraformerError, match="SimpleNamespace checkpoint"):  # a network that cannot continue text
        require_causal_lm(SimpleNamespace(net=tiny_model("causal")), "run.ckpt")


def test_an_unknown_task_is_named_with_the_local_ones(tmp_path: Path) -> None:
    """A name the --include_path folder lacks: one line naming it and the folder's tasks; a folder that is not one
    is named too."""
    tasks = write_tasks(tmp_path / "tasks")
    with pytest.raises(ConfigError) as refused:
        task_manager([CHOICE, "tiny_quiz"], tasks, builtin=False)
    message = str(refused.value)
    assert message.startswith("--tasks tiny_quiz: no such lm-eval task") and "\n" not in message
    assert f"holds {', '.join(sorted([CHOICE, CONTINUE, TEXT]))}" in message
    with pytest.raises(ConfigError, match="--include_path .*: not a folder"):
        task_manager([CHOICE], tasks / f"{CHOICE}.yaml")


def test_a_task_whose_data_is_gone_is_one_line(tmp_path: Path) -> None:
    """A task YAML whose data file is missing: the tasks and the file named, the offline way to write one."""
    tasks = write_tasks(tmp_path / "tasks")
    (tasks / f"{TEXT}.jsonl").unlink()
    with pytest.raises(TetraformerError) as refused:
        run_harness(DummyLM(), [TEXT], task_manager([TEXT], tasks, builtin=False))
    message = str(refused.value)
    assert message.startswith(f"--tasks {TEXT}: lm-eval could not load a task's data") and "\n" not in message
    assert f"{TEXT}.jsonl" in message and "dataset_path: json" in message


def test_without_lm_eval_the_command_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval is optional: its absence is one line naming the extra to install."""
    monkeypatch.setattr(harness.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TetraformerError, match=r'not installed: pip install "tetraformer\[eval\]"'):
        require_lm_eval()
