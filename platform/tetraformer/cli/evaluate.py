"""`tetraformer evaluate --ckpt CKPT --tasks NAMES [--include_path DIR] ...`: EleutherAI's lm-evaluation-harness on
a causal-LM checkpoint's own network, offline on task YAMLs over local files; a results JSON and a logged table."""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tetraformer.cli.option_errors import output_file
from tetraformer.cli.parser import CommandParser
from tetraformer.errors import ConfigError
from tetraformer.safe_loading import add_trust_flag

log = logging.getLogger(__name__)
RESULTS_SUFFIX = ".lm_eval.json"  # default results file: beside the checkpoint, CKPT_STEM.lm_eval.json


def evaluate_main(argv: list[str]) -> None:
    """Parse the command line, run lm-eval on the checkpoint, write the results and log their table."""
    args = parser().parse_args(argv)
    names, limit = task_names(args.tasks), limit_value(args.limit)
    if args.batch_size < 1:
        raise ConfigError(f"--batch_size {args.batch_size}: must be 1 or more")
    output = output_file(args.output or default_output(args.ckpt), "--output")

    from tetraformer.evaluation.harness import evaluate_task, require_lm_eval, task_manager

    require_lm_eval()
    manager = task_manager(names, args.include_path)  # before the checkpoint loads: a wrong name shows at once
    task = causal_task(args.ckpt, args.device or default_device())
    scores, results = evaluate_task(task, names, manager, args.batch_size, limit, args.num_fewshot)
    include = str(args.include_path) if args.include_path is not None else None
    settings = {"tasks": names, "include_path": include, "limit": limit, "num_fewshot": args.num_fewshot}
    write_results(output, args.ckpt, scores, results, {**settings, "batch_size": args.batch_size})


def causal_task(ckpt: Path, device: str) -> Any:
    """The checkpoint's task module on `device`, checked to have a tokenizer and a causal LM to score."""
    from tetraformer.cli.task_loading import load_task, require_tokenizer
    from tetraformer.evaluation.harness import require_causal_lm

    task = load_task(str(ckpt), device)
    require_tokenizer(task, str(ckpt))
    require_causal_lm(task, ckpt)
    return task


def write_results(output: Path, ckpt: Path, scores: Any, results: dict[str, Any], settings: dict[str, Any]) -> None:
    """The scores JSON (with the checkpoint, settings, documents per task and lm-eval's version) and the log table."""
    from tetraformer.evaluation.scores import scores_table, write_scores

    samples = {name: counts.get("effective") for name, counts in results.get("n-samples", {}).items()}
    about = {"checkpoint": str(ckpt), "settings": settings, "samples": samples, "lm_eval": version("lm_eval")}
    write_scores(output, scores, **about)
    log.info("lm-eval scores of %s:\n%s", ckpt, scores_table(scores))
    log.info("wrote %s", output)


def parser() -> CommandParser:
    """The command's options (lm-eval's own spellings)."""
    parser = CommandParser(
        prog="tetraformer evaluate",
        description="Score a causal-LM checkpoint with EleutherAI's lm-evaluation-harness (pip install "
        '"tetraformer[eval]"), on lm-eval task YAMLs over your own JSON/CSV files.',
    )
    parser.add_argument("--ckpt", type=Path, required=True, help="a language-model or chat checkpoint (.ckpt)")
    parser.add_argument(
        "--tasks", nargs="+", required=True, help="lm-eval task, group or tag names (comma- or space-separated)"
    )
    parser.add_argument("--include_path", type=Path, help="folder of your task YAML files (searched first)")
    parser.add_argument("--limit", type=float, help="first N examples of each task (below 1: that share of them)")
    parser.add_argument("--batch_size", type=int, default=8, help="requests scored at once (default 8)")
    parser.add_argument("--num_fewshot", type=int, help="few-shot examples per prompt (default: each task's own)")
    parser.add_argument("--output", type=Path, help=f"results JSON (default: beside CKPT, CKPT_STEM{RESULTS_SUFFIX})")
    parser.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    add_trust_flag(parser)
    return parser


def task_names(values: list[str]) -> list[str]:
    """`a,b c` -> [a, b, c], each once, in order."""
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    if not names:
        raise ConfigError("--tasks: give at least one lm-eval task name")
    return list(dict.fromkeys(names))


def limit_value(limit: float | None) -> float | int | None:
    """A whole number of examples as an int (lm-eval reads a float below 1 as a share)."""
    if limit is None:
        return None
    if limit <= 0 or (limit >= 1 and not limit.is_integer()):
        raise ConfigError(f"--limit {limit:g}: give a whole number of examples, or a share between 0 and 1")
    return int(limit) if limit >= 1 else limit


def default_device() -> str:
    """cuda when torch sees a GPU, else cpu."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_output(ckpt: Path) -> Path:
    """CKPT_DIR/CKPT_STEM.lm_eval.json."""
    return ckpt.with_name(ckpt.stem + RESULTS_SUFFIX)
