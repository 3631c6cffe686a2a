#!/usr/bin/env python
"""Does pretraining pay, and from which budget? Fine-tunes one config from every snapshot a pretraining run kept
(`--run.keep_every_n_steps`: checkpoints/step-N.ckpt) and trains the from-scratch config beside them, each for
the same seeds, tests every run's last.ckpt, and writes the curve: test metrics by pretraining steps.

    tetraformer fit -c configs/masked_lm/news_pretrain.yaml
    python scripts/pretraining_curve.py --pretrained runs/masked_lm_news \
        --finetune configs/text_classification/reuters_r8_news.yaml \
        --scratch configs/text_classification/reuters_r8.yaml --seeds 0 1 --out runs/pretraining_curve

Every run lives in OUT/<budget>-seed<S>; a run whose test metrics are already there is not run again, so the
script can be rerun as more snapshots appear. The table goes to OUT/curve.md and OUT/curve.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from studies_common import checkout_pythonpath

from tetraformer.accel.chooser import cpu_model

SNAPSHOT = re.compile(r"step-(\d+)\.ckpt$")


@dataclass
class Budget:
    """A starting point: pretraining steps (0: from scratch) and the config and checkpoint it fine-tunes."""

    steps: int
    config: Path
    init_from: Path | None
    mlm_accuracy: float | None = None  # the pretraining run's validation masked-token accuracy at that step


def snapshots(pretrained: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoints/step-N.ckpt a pretraining run kept, by step."""
    found = [
        (int(m.group(1)), p) for p in (pretrained / "checkpoints").glob("step-*.ckpt") if (m := SNAPSHOT.search(p.name))
    ]
    return sorted(found)


def newest(paths: Iterable[Path]) -> Path | None:
    """The most recently written of some files, or None when there are none."""
    return max(paths, key=lambda p: p.stat().st_mtime, default=None)


def metrics_rows(metrics: Path) -> list[dict[str, str]]:
    """The rows of a Lightning CSV logger's metrics.csv."""
    with metrics.open(newline="") as f:
        return list(csv.DictReader(f))


def validation_at(pretrained: Path, key: str) -> dict[int, float]:
    """step -> the pretraining run's logged value of `key` (its validations), from its newest metrics.csv."""
    metrics = newest(pretrained.glob("logs/version_*/metrics.csv"))
    if metrics is None:
        return {}
    # Lightning logs a validation at the step before the global step it follows, hence + 1
    return {int(r["step"]) + 1: float(r[key]) for r in metrics_rows(metrics) if r.get(key)}


def budgets(args: argparse.Namespace) -> list[Budget]:
    """From scratch, then one budget per snapshot, with the pretraining's validation metric where it has one."""
    accuracy = validation_at(args.pretrained, args.pretrain_metric)
    found = [Budget(0, args.scratch, None)] if args.scratch else []
    for step, path in snapshots(args.pretrained):
        found.append(Budget(step, args.finetune, path, accuracy.get(step)))
    if len(found) < 2:
        raise SystemExit(f"error: no checkpoints/step-N.ckpt under {args.pretrained} (--run.keep_every_n_steps)")
    return found


def test_metrics(run: Path) -> dict[str, float] | None:
    """The test split's metrics (test/<name>, per-class ones left out) of a run's newest `tetraformer test`."""
    metrics = newest(run.glob("eval/test-*/logs/version_*/metrics.csv"))
    if metrics is None:
        return None
    values = {k: float(v) for row in metrics_rows(metrics) for k, v in row.items() if v and k.count("/") == 1}
    return {k: v for k, v in values.items() if k.startswith("test/")} or None


def cli(*args: str) -> None:
    """`tetraformer ARGS...` in a child process (the platform and the tasks importable from this checkout)."""
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath()}
    subprocess.run([sys.executable, "-m", "tetraformer.cli", *args], check=True, env=env)


def fine_tune(budget: Budget, seed: int, args: argparse.Namespace) -> dict[str, float]:
    """Fit (unless done) and test one budget and seed: its test metrics."""
    run = args.out / f"{budget.steps}-seed{seed}"
    if (done := test_metrics(run)) is not None:
        return done
    start = ["--model.init_from", str(budget.init_from)] if budget.init_from else []
    options = ["--seed_everything", str(seed), "--trainer.default_root_dir", str(run), *start, *args.extra]
    cli("fit", "-c", str(budget.config), *options)
    cli("test", "--ckpt_path", str(run / "checkpoints" / "last.ckpt"), "--data.test_path", args.test_path)
    found = test_metrics(run)
    if found is None:
        raise RuntimeError(f"`tetraformer test` left no test metrics under {run}/eval")
    return found


def summary(values: list[float]) -> str:
    """Mean, and ± the standard deviation over seeds when there are several."""
    mean = f"{statistics.fmean(values):.4f}"
    return mean if len(values) < 2 else f"{mean} ± {statistics.stdev(values):.4f}"


def table(rows: list[tuple[Budget, list[dict[str, float]]]]) -> str:
    """The curve as a markdown table: one row per budget, one column per test metric (mean over seeds)."""
    names = sorted({k for _, results in rows for result in results for k in result})
    lines = [
        "| pretraining steps | val masked accuracy | seeds | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for budget, results in rows:
        accuracy = "-" if budget.mlm_accuracy is None else f"{budget.mlm_accuracy:.4f}"
        cells = [summary([r[name] for r in results if name in r]) for name in names]
        lines.append(
            f"| {budget.steps or '0 (from scratch)'} | {accuracy} | {len(results)} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options; anything after `--` is passed to every `fit`."""
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained", type=Path, required=True, help="the pretraining run's directory")
    parser.add_argument("--finetune", type=Path, required=True, help="config that fine-tunes (--model.init_from)")
    parser.add_argument("--scratch", type=Path, help="config that trains the same model from scratch (budget 0)")
    parser.add_argument("--test_path", default="data/reuters/test.csv", help="the test split every run is scored on")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--pretrain_metric", default="val/mlm_accuracy", help="the pretraining column to show")
    parser.add_argument("--out", type=Path, default=Path("runs/pretraining_curve"))
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.extra = extra
    return args


def main(argv: list[str] | None = None) -> list[tuple[Budget, list[dict[str, float]]]]:
    """Run what is missing, then write and print the curve."""
    args = parse_args(argv)
    rows = [(budget, [fine_tune(budget, seed, args) for seed in args.seeds]) for budget in budgets(args)]
    text = f"CPU: {cpu_model()}; each run's last.ckpt on {args.test_path}\n\n{table(rows)}\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "curve.md").write_text(text)
    records = [{**asdict(b), "results": r} for b, r in rows]
    (args.out / "curve.json").write_text(json.dumps(records, indent=1, default=str))
    print(text)
    return rows


if __name__ == "__main__":
    main()
