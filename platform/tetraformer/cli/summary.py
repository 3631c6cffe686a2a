"""`tetraformer summary RUN_DIR`: where a finished run left its checkpoints, metrics and W&B run, its throughput
and MFU, and how validation loss moved (what `make quickstart` prints at the end)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from pathlib import Path

from tetraformer.cli.parser import CommandParser
from tetraformer.errors import ConfigError

RATES = ("tokens_per_s", "samples_per_s", "mfu")


def validation_losses(metrics: Path) -> list[tuple[int, float]]:
    """(step, val/loss) pairs of a metrics.csv, in order."""
    with metrics.open(newline="") as f:
        return [(int(r["step"]), float(r["val/loss"])) for r in csv.DictReader(f) if r.get("val/loss")]


def throughput(metrics: Path) -> str | None:
    """The run's mean tokens/s, samples/s and MFU (with its peak) from a metrics.csv, or None when it logged none.

    The train/mean_* row Throughput writes when training ends, else the mean of the per-interval rows.
    """
    with metrics.open(newline="") as f:
        rows = list(csv.DictReader(f))
    means = {key: _mean(rows, f"train/mean_{key}") or _mean(rows, f"train/{key}") for key in RATES}
    if not means["tokens_per_s"]:
        return None
    line = f"{means['tokens_per_s']:,.0f} tokens/s, {means['samples_per_s'] or 0:,.1f} samples/s"
    peak = _mean(rows, "train/peak_tflops")
    if means["mfu"]:
        line += f", MFU {means['mfu']:.2%}" + (f" of {peak:.3g} TFLOP/s" if peak else "")
    return line


def _mean(rows: list[dict[str, str]], key: str) -> float | None:
    """Mean of a column's non-empty values, or None."""
    values = [float(r[key]) for r in rows if r.get(key)]
    return sum(values) / len(values) if values else None


def summary_lines(run: Path) -> list[str]:
    """The summary of RUN_DIR, one line per fact."""
    metrics = sorted(run.glob("logs/version_*/metrics.csv"), key=lambda p: p.stat().st_mtime)
    wandb_runs = sorted(run.glob("wandb/offline-run-*"), key=lambda p: p.stat().st_mtime)
    lines = [f"Run directory:   {run}"]
    lines += [f"Checkpoint:      {ckpt}" for ckpt in sorted(run.glob("checkpoints/*.ckpt"))]
    if metrics:
        lines.append(f"Metrics (CSV):   {metrics[-1]}")
        rates = throughput(metrics[-1])
        if rates:
            lines.append(f"Throughput:      {rates}")
        losses = validation_losses(metrics[-1])
        if losses:
            lines.append("val/loss by step " + "  ".join(f"{step}:{loss:.3f}" for step, loss in losses))
    if wandb_runs:
        lines += [f"W&B offline run: {wandb_runs[-1]}", f"Upload it with:  wandb sync {wandb_runs[-1]}"]
    return lines


def summary_main(argv: Sequence[str]) -> None:
    """Print the summary of RUN_DIR; a folder that is not there is one `error:` line."""
    about = "Summarise a finished run: checkpoints, metrics, throughput and MFU, val/loss, the W&B run."
    parser = CommandParser(prog="tetraformer summary", description=about)
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run's trainer.default_root_dir")
    run = parser.parse_args(argv).run_dir
    if not run.is_dir():
        raise ConfigError(f"{run}: no such run directory (give a fit's trainer.default_root_dir, e.g. runs/NAME)")
    sys.stdout.write("\n" + "\n".join(summary_lines(run)) + "\n")
