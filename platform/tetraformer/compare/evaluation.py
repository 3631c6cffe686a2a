"""A comparison's `evaluate:` section: each run's final checkpoint scored by `tetraformer evaluate` (lm-eval).

evaluate:
  tasks: [my_quiz, my_text]     # lm-eval task names (task YAMLs of include_path, or lm-eval's own)
  include_path: tasks/          # relative to the comparison file, else to the working directory
  limit: 200                    # optional, as the command's --limit, --num_fewshot, --batch_size
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.evaluation.harness import require_lm_eval
from tetraformer.evaluation.scores import flat_scores, read_scores

EVALUATE_KEYS = ("tasks", "include_path", "limit", "num_fewshot", "batch_size")
SCORES_FILE = "lm_eval.json"  # RUN_DIR/lm_eval.json: the run's `tetraformer evaluate` results
FINAL_CHECKPOINT = Path("checkpoints") / "last.ckpt"


@dataclass(frozen=True)
class EvaluateSpec:
    """The lm-eval tasks every run's final checkpoint is scored on, and the options of the command."""

    tasks: list[str]
    include_path: Path | None = None
    limit: float | None = None
    num_fewshot: int | None = None
    batch_size: int | None = None


def evaluate_spec(path: Path, section: Any) -> EvaluateSpec | None:
    """The `evaluate:` section checked (lm-eval installed, the tasks named, the folder there); None when absent."""
    if section is None:
        return None
    if not isinstance(section, dict) or not section.get("tasks"):
        raise ConfigError(f"{path}: evaluate: expected a mapping with 'tasks' (e.g. evaluate: {{tasks: [my_quiz]}})")
    unknown = sorted(set(section) - set(EVALUATE_KEYS))
    if unknown:
        raise ConfigError(f"{path}: evaluate.{unknown[0]}: unknown key (known: {', '.join(EVALUATE_KEYS)})")
    tasks = section["tasks"] if isinstance(section["tasks"], list) else [section["tasks"]]
    if not all(isinstance(task, str) and task for task in tasks):
        raise ConfigError(f"{path}: evaluate.tasks: expected lm-eval task names, got {section['tasks']!r}")
    for key in ("limit", "num_fewshot", "batch_size"):
        value = section.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise ConfigError(f"{path}: evaluate.{key}: expected a number, got {value!r}")
    try:
        require_lm_eval()
    except TetraformerError as err:
        raise ConfigError(f"{path}: evaluate: {err}") from None
    folder = section.get("include_path")
    options = {k: section[k] for k in ("limit", "num_fewshot", "batch_size") if section.get(k) is not None}
    return EvaluateSpec(list(tasks), _folder(path, folder) if folder is not None else None, **options)


def _folder(path: Path, folder: Any) -> Path:
    """The include_path, relative to the comparison file or else to the working directory."""
    for candidate in (path.parent / str(folder), Path(str(folder))):
        if candidate.is_dir():
            return candidate.resolve()
    where = f"relative to {path.parent} or the cwd"
    raise ConfigError(f"{path}: evaluate.include_path '{folder}' is not a folder ({where})")


def evaluate_args(spec: EvaluateSpec, run_dir: Path) -> list[str]:
    """The `tetraformer evaluate` command line of a run's final checkpoint, its scores to RUN_DIR/lm_eval.json."""
    args = ["evaluate", "--ckpt", str(run_dir / FINAL_CHECKPOINT), "--tasks", ",".join(spec.tasks)]
    if spec.include_path is not None:
        args += ["--include_path", str(spec.include_path)]
    for key in ("limit", "num_fewshot", "batch_size"):
        if getattr(spec, key) is not None:
            args += [f"--{key}", str(getattr(spec, key))]
    return [*args, "--output", str(run_dir / SCORES_FILE)]


def run_scores(spec: EvaluateSpec, run_dir: Path) -> dict[str, float | None] | None:
    """`{"TASK/METRIC": value}` of the run's scores file when it scored the spec's tasks with its options, else None
    (not scored yet, or scored on other tasks or options)."""
    path = run_dir / SCORES_FILE
    if not path.is_file():
        return None
    settings = json.loads(path.read_text(encoding="utf-8")).get("settings", {})
    include = str(spec.include_path) if spec.include_path is not None else None
    asked = {"tasks": spec.tasks, "include_path": include, "limit": spec.limit, "num_fewshot": spec.num_fewshot}
    if any(settings.get(key) != value for key, value in asked.items()):
        return None
    return flat_scores(read_scores(path))
