"""Run lm-evaluation-harness on a causal-LM checkpoint: task lookup (local task YAMLs first), the run, its scores.

lm_eval is imported inside the functions that run it, so `compare` and the CLI import this module for nothing.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from tetraformer.core import CausalLM
from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.evaluation.scores import Scores, harness_scores
from tetraformer.training.rng import rng_kept

log = logging.getLogger(__name__)
INSTALL = 'pip install "tetraformer[eval]" (or pip install "lm-eval>=0.4.13")'


def require_lm_eval() -> None:
    """A one-line error saying how to install lm-evaluation-harness where it is missing."""
    if importlib.util.find_spec("lm_eval") is None:
        raise TetraformerError(f"evaluation runs EleutherAI's lm-evaluation-harness, which is not installed: {INSTALL}")


def require_causal_lm(task: Any, ckpt: str | Path) -> None:
    """Refuse a checkpoint whose network is not a generating decoder-only language model, in one line."""
    if not isinstance(task.net, CausalLM) or not callable(getattr(task, "continue_texts", None)):
        raise TetraformerError(
            f"{ckpt} is a {type(task).__name__} checkpoint ({type(task.net).__name__}): lm-eval scores causal "
            "language models (language_modeling, instruction_tuning and other decoder-only text tasks), not "
            "encoders, encoder-decoders or image models"
        )


def task_manager(names: list[str], include_path: Path | None, builtin: bool = True) -> Any:
    """lm-eval's TaskManager for `names`: the task YAMLs of `include_path` alone when they hold every name (indexing
    lm-eval's thousands of built-in tasks takes seconds), else with the built-in ones too (when `builtin`); a name
    found nowhere is a ConfigError naming it and the local tasks."""
    from lm_eval.tasks import TaskManager

    local = None
    if include_path is not None:
        if not include_path.is_dir():
            raise ConfigError(f"--include_path {include_path}: not a folder; give the folder of your task YAML files")
        local = TaskManager(include_path=str(include_path), include_defaults=False)
        if not _unknown(local, names):
            return local
    if not builtin:
        raise _no_such_tasks(_unknown(local, names) if local else names, include_path, local, None)
    manager = TaskManager(include_path=str(include_path) if include_path else None)
    unknown = _unknown(manager, names)
    if unknown:
        raise _no_such_tasks(unknown, include_path, local, manager)
    return manager


def _no_such_tasks(unknown: list[str], include_path: Path | None, local: Any, everything: Any) -> ConfigError:
    """The one line for task names found nowhere: where they were looked for, and how to make one."""
    found = local.all_tasks if local is not None else []
    where = f"--include_path {include_path} holds {', '.join(found) or 'none'}" if include_path else "no --include_path"
    builtin = len(everything.all_tasks) - len(found) if everything is not None else 0
    searched = f"nor do lm-eval's {builtin} built-in tasks" if everything is not None else "built-ins not searched"
    return ConfigError(
        f"--tasks {', '.join(unknown)}: no such lm-eval task ({where}; {searched}): write a task YAML over your "
        "data file (dataset_path: json, dataset_kwargs: {data_files: FILE}) into the --include_path folder"
    )


def _unknown(manager: Any, names: list[str]) -> list[str]:
    """The names that are neither a task, group or tag the manager indexed, nor a task YAML file."""
    known = set(manager.all_tasks)
    return [name for name in names if name not in known and not Path(name).is_file()]


def run_harness(
    lm: Any,
    names: list[str],
    manager: Any,
    limit: float | None = None,
    num_fewshot: int | None = None,
    log_samples: bool = False,
) -> dict[str, Any]:
    """lm-eval's `simple_evaluate` of the model on the tasks (its results dict); the global random generators,
    which it seeds, are left as they were, and a task whose data cannot be read is one line naming the tasks."""
    import lm_eval

    try:
        with rng_kept():
            return lm_eval.simple_evaluate(
                model=lm,
                tasks=names,
                task_manager=manager,
                limit=limit,
                num_fewshot=num_fewshot,
                log_samples=log_samples,
            )
    except (OSError, ValueError) as err:  # datasets: FileNotFoundError, ConnectionError; DatasetGenerationError
        if isinstance(err, TetraformerError) or not _data_error(err):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TetraformerError(
            f"--tasks {', '.join(names)}: lm-eval could not load a task's data ({first}); offline, a task reads a "
            "local file: dataset_path: json (or csv), dataset_kwargs: {data_files: FILE}"
        ) from err


def _data_error(err: BaseException) -> bool:
    """Whether an error came from loading a task's dataset (`datasets` or the Hugging Face Hub client)."""
    module = type(err).__module__
    return isinstance(err, OSError) or module.startswith(("datasets", "huggingface_hub"))


def evaluate_task(
    task: Any, names: list[str], manager: Any, batch_size: int, limit: float | None, num_fewshot: int | None
) -> tuple[Scores, dict[str, Any]]:
    """(scores, lm-eval's results dict) of a causal-LM task module on the tasks, through CheckpointLM."""
    from tetraformer.evaluation.checkpoint_lm import CheckpointLM

    results = run_harness(CheckpointLM(task, batch_size), names, manager, limit, num_fewshot)
    return harness_scores(results), results
