"""`tetraformer compare -c COMPARISON.yaml [--budget.* ...] [--seeds N] [--out DIR]`: runs and report."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from tetraformer.cli.parser import CommandParser
from tetraformer.compare.report import write_report
from tetraformer.compare.runner import run_comparison
from tetraformer.compare.spec import load_spec
from tetraformer.errors import ConfigError, RunsFailed
from tetraformer.training.reports.loggers import WandbMode

log = logging.getLogger(__name__)
DEFAULT_OUT = Path("runs") / "compare"


def compare_main(argv: list[str]) -> None:
    """Parse the command line, run every variant x seed not done yet, and write the comparison's report."""
    parser = CommandParser(
        prog="tetraformer compare",
        description="Train variants of a config on equal budgets and seeds, and report them side by side.",
    )
    parser.add_argument("-c", "--config", type=Path, required=True, help="the comparison file (YAML)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--budget.max_steps", dest="max_steps", type=int, help="optimizer steps per run")
    budget.add_argument("--budget.max_time", dest="max_time", help="wall time per run, HH:MM:SS")
    budget.add_argument("--budget.tokens", dest="tokens", type=int, help="training tokens (or images) per run")
    parser.add_argument("--seeds", type=int, help="number of seeds (0..N-1) instead of the file's")
    parser.add_argument("--out", type=Path, help=f"output folder (default {DEFAULT_OUT}/<comparison name>)")
    parser.epilog = (
        "Any other --section.key VALUE (e.g. --data.train_path my.csv --model.arch.d_model 128) is an override "
        "shared by every run, laid over the comparison file's `overrides`."
    )
    args, rest = parser.parse_known_args(argv)

    flags = {k: getattr(args, k) for k in ("max_steps", "max_time", "tokens") if getattr(args, k) is not None}
    spec = load_spec(args.config, budget=flags or None, seeds=args.seeds, overrides=shared_flags(rest))
    out = args.out or DEFAULT_OUT / spec.name
    log.info(
        "%s: %d variants x %d seeds, %s each -> %s",
        spec.name,
        len(spec.variants),
        len(spec.seeds),
        spec.budget.describe(),
        out,
    )
    results = run_comparison(spec, out)
    write_report(out, results, spec.name, base_wandb_mode(spec.base))
    failed = [f"{r.variant}/seed{r.seed}: {r.error}" for r in results if not r.done]
    if failed:
        log.warning("%d of %d runs failed:\n  %s", len(failed), len(results), "\n  ".join(failed))
        every = "all" if len(failed) == len(results) else f"{len(failed)} of"
        raise RunsFailed(f"{every} {len(results)} runs failed: see {out / 'results.md'} and each run's fit.log")


def shared_flags(rest: list[str]) -> dict[str, str]:
    """`--section.key VALUE` / `--section.key=VALUE` pairs left by the parser, as {section.key: VALUE}."""
    shared: dict[str, str] = {}
    i = 0
    while i < len(rest):
        flag = rest[i]
        if not flag.startswith("--") or "." not in flag.split("=", 1)[0]:
            raise ConfigError(
                f"unexpected argument {flag!r}: overrides shared by every run are --section.key VALUE "
                "(see tetraformer compare --help)"
            )
        if "=" in flag:
            key, value = flag[2:].split("=", 1)
            i += 1
        elif i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            key, value = flag[2:], rest[i + 1]
            i += 2
        else:
            raise ConfigError(f"{flag}: give it a value (--section.key VALUE)")
        shared[key] = value
    return shared


def base_wandb_mode(base: Path) -> WandbMode:
    """The base config's `run.wandb` (default auto): the report's W&B summary run goes where the runs go."""
    config: Any = yaml.safe_load(base.read_text(encoding="utf-8")) or {}
    run = config.get("run") if isinstance(config, dict) else None
    return run.get("wandb", "auto") if isinstance(run, dict) else "auto"
