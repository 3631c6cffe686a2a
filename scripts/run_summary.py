"""Print where a finished run left its checkpoints, metrics and W&B run, its throughput and MFU, and how validation
loss moved."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

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


def main() -> None:
    """Summarise RUN_DIR."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_dir", type=Path)
    run = parser.parse_args().run_dir
    metrics = sorted(run.glob("logs/version_*/metrics.csv"), key=lambda p: p.stat().st_mtime)
    wandb_runs = sorted(run.glob("wandb/offline-run-*"), key=lambda p: p.stat().st_mtime)
    print(f"\nRun directory:   {run}")
    for ckpt in sorted(run.glob("checkpoints/*.ckpt")):
        print(f"Checkpoint:      {ckpt}")
    if metrics:
        print(f"Metrics (CSV):   {metrics[-1]}")
        rates = throughput(metrics[-1])
        if rates:
            print(f"Throughput:      {rates}")
        losses = validation_losses(metrics[-1])
        if losses:
            trail = "  ".join(f"{step}:{loss:.3f}" for step, loss in losses)
            print(f"val/loss by step {trail}")
    if wandb_runs:
        print(f"W&B offline run: {wandb_runs[-1]}")
        print(f"Upload it with:  wandb sync {wandb_runs[-1]}")


if __name__ == "__main__":
    main()
