"""Runs a comparison: each variant and seed as its own `tetraformer fit` subprocess, one after another."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetraformer.compare.evaluation import evaluate_args, run_scores
from tetraformer.compare.extrapolation import extrapolate
from tetraformer.compare.measure import measure_run
from tetraformer.compare.result import RunResult, read_result, write_result
from tetraformer.compare.spec import Budget, ComparisonSpec, Variant

log = logging.getLogger(__name__)
FIT_LOG = "fit.log"
COMMAND_FILE = "command.json"  # the run's fit command line: a restart skips a done run only when it is unchanged


@dataclass
class Launched:
    """What a finished subprocess left: its exit status, peak RSS and the last line of its output."""

    returncode: int
    peak_rss_mb: float
    last_line: str


Launcher = Callable[[list[str], Path], Launched]


def launch(args: list[str], log_file: Path) -> Launched:
    """Run `python -m tetraformer.cli ARGS` with its output in `log_file`; its peak RSS from os.wait4."""
    with log_file.open("a", encoding="utf-8") as out:
        process = subprocess.Popen([sys.executable, "-m", "tetraformer.cli", *args], stdout=out, stderr=out)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in log_file.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return Launched(process.returncode, usage.ru_maxrss / 1024, lines[-1] if lines else "")  # ru_maxrss: KiB


def budget_flags(budget: Budget) -> list[str]:
    """Trainer flags that give every run the same budget and no other limit."""
    unlimited = {"--trainer.max_steps": "-1", "--trainer.max_epochs": "-1", "--trainer.max_time": "null"}
    if budget.max_steps is not None:
        unlimited["--trainer.max_steps"] = str(budget.max_steps)
    elif budget.max_time is not None:
        unlimited["--trainer.max_time"] = budget.max_time
    else:
        unlimited["--run.max_tokens"] = str(budget.tokens)
    return [part for flag, value in unlimited.items() for part in (flag, value)]


def override_flags(overrides: dict[str, Any]) -> list[str]:
    """`--dotted.key value` per override; non-strings as JSON (which the CLI parses as YAML)."""
    flags = []
    for key, value in overrides.items():
        flags += [f"--{key}", value if isinstance(value, str) else json.dumps(value)]
    return flags


def fit_args(spec: ComparisonSpec, variant: Variant, seed: int, run_dir: Path) -> list[str]:
    """The `tetraformer fit` command line of one run."""
    args = ["fit", "-c", str(spec.base.resolve()), *override_flags({**spec.shared, **variant.overrides})]
    args += ["--seed_everything", str(seed), "--trainer.default_root_dir", str(run_dir)]
    args += ["--run.group", spec.name, "--run.name", f"{spec.name}/{variant.name}/seed{seed}"]
    args += [*budget_flags(spec.budget), "--run.peak_tflops", str(spec.peak_tflops)]
    return args


def testing_args(spec: ComparisonSpec, run_dir: Path) -> list[str]:
    """The `tetraformer test` command line on a run's best checkpoint (which holds its config)."""
    ckpt = run_dir / "checkpoints" / "best.ckpt"
    return ["test", "--ckpt_path", str(ckpt), "--run.group", spec.name]


def run_one(spec: ComparisonSpec, variant: Variant, seed: int, run_dir: Path, launcher: Launcher) -> RunResult:
    """Fit (and test) one run from scratch and measure it; a failure's result holds the error's last line."""
    if run_dir.exists():
        shutil.rmtree(run_dir)  # an incomplete or failed run starts again from nothing
    run_dir.mkdir(parents=True)
    start = time.perf_counter()
    steps = [fit_args(spec, variant, seed, run_dir)] + ([testing_args(spec, run_dir)] if spec.test else [])
    (run_dir / COMMAND_FILE).write_text(json.dumps(steps[0]), encoding="utf-8")
    peak_rss = 0.0
    for args in steps:
        launched = launcher(args, run_dir / FIT_LOG)
        peak_rss = peak_rss or launched.peak_rss_mb  # the training process's, not the test's
        if launched.returncode != 0:
            log.warning("%s seed %d failed (%s): %s", variant.name, seed, args[0], launched.last_line)
            return failed(variant, seed, run_dir, f"{args[0]}: {launched.last_line}", time.perf_counter() - start)
    result = RunResult(variant.name, seed, str(run_dir), "done", overrides=dict(variant.overrides))
    try:
        measure_run(result, run_dir, peak_rss)
        if spec.extrapolation:
            result.extrapolation = extrapolate(run_dir, spec.extrapolation)
    except (OSError, KeyError, ValueError) as err:
        return failed(variant, seed, run_dir, f"measuring: {err}", time.perf_counter() - start)
    score(spec, result, run_dir, launcher)
    result.wall_s = time.perf_counter() - start
    return result


def score(spec: ComparisonSpec, result: RunResult, run_dir: Path, launcher: Launcher) -> None:
    """Fill `result.evaluation` with the lm-eval scores of the run's final checkpoint (`tetraformer evaluate`, run
    once for the spec's tasks and options). A failed evaluation is logged and kept as the result's error: the run
    stays done, and a restart scores it again without training it again."""
    if spec.evaluate is None:
        return
    scores = run_scores(spec.evaluate, run_dir)
    if scores is None:
        launched = launcher(evaluate_args(spec.evaluate, run_dir), run_dir / FIT_LOG)
        if launched.returncode != 0:
            log.warning("%s seed %d: evaluate failed: %s", result.variant, result.seed, launched.last_line)
            result.error = f"evaluate: {launched.last_line}"
            return
        scores = run_scores(spec.evaluate, run_dir) or {}
    result.evaluation, result.error = scores, None


def failed(variant: Variant, seed: int, run_dir: Path, error: str, wall_s: float) -> RunResult:
    """The result of a run that did not finish."""
    return RunResult(
        variant.name,
        seed,
        str(run_dir),
        "failed",
        error=error,
        overrides=dict(variant.overrides),
        wall_s=wall_s,
    )


def run_comparison(spec: ComparisonSpec, out_dir: Path, launcher: Launcher = launch) -> list[RunResult]:
    """Every variant x seed under OUT/<variant>/seed<k>/, skipping runs whose result.json says done."""
    results = []
    for variant in spec.variants:
        for seed in spec.seeds:
            run_dir = out_dir / variant.name / f"seed{seed}"
            previous = read_result(run_dir)
            if previous is not None and previous.done and unchanged(run_dir, fit_args(spec, variant, seed, run_dir)):
                log.info("%s seed %d: done before, skipped (%s)", variant.name, seed, run_dir)
                if spec.evaluate is not None:  # scores asked for since it ran, or an evaluation that failed
                    score(spec, previous, run_dir, launcher)
                    write_result(previous, run_dir)
                results.append(previous)
                continue
            log.info("%s seed %d: %s -> %s", variant.name, seed, spec.budget.describe(), run_dir)
            result = run_one(spec, variant, seed, run_dir, launcher)
            write_result(result, run_dir)
            results.append(result)
    check_equal_budgets(spec.budget, results)
    return results


def unchanged(run_dir: Path, args: list[str]) -> bool:
    """Whether a run was trained with this fit command line (same base, overrides, seed and budget).

    The W&B group and run name (the comparison's name) do not change what a run trains, so they may differ.
    """
    path = run_dir / COMMAND_FILE
    if path.is_file() and training_args(json.loads(path.read_text(encoding="utf-8"))) == training_args(args):
        return True
    log.info("%s: its base, overrides, seed or budget changed since it ran: running it again", run_dir)
    return False


def training_args(args: list[str]) -> list[str]:
    """A fit command line without its W&B group and run name."""
    kept: list[str] = []
    for arg in args:
        if kept and kept[-1] in ("--run.group", "--run.name"):
            kept.pop()
        else:
            kept.append(arg)
    return kept


def check_equal_budgets(budget: Budget, results: list[RunResult]) -> None:
    """Warn when finished runs trained on unequal steps (a steps budget) or tokens (a tokens budget)."""
    done = [r for r in results if r.done]
    if budget.max_steps is not None and len({r.steps for r in done}) > 1:
        log.warning("runs trained on unequal steps: %s", {f"{r.variant}/seed{r.seed}": r.steps for r in done})
    if budget.tokens is not None:
        short = [f"{r.variant}/seed{r.seed}" for r in done if r.tokens < budget.tokens]
        if short:
            log.warning("runs stopped before %d tokens (their data ran out?): %s", budget.tokens, short)
