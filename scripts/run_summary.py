"""Print where a finished run left its checkpoints, metrics and W&B run, and how validation loss moved."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def validation_losses(metrics: Path) -> list[tuple[int, float]]:
    """(step, val/loss) pairs of a metrics.csv, in order."""
    with metrics.open(newline="") as f:
        return [(int(r["step"]), float(r["val/loss"])) for r in csv.DictReader(f) if r.get("val/loss")]


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
        losses = validation_losses(metrics[-1])
        if losses:
            trail = "  ".join(f"{step}:{loss:.3f}" for step, loss in losses)
            print(f"val/loss by step {trail}")
    if wandb_runs:
        print(f"W&B offline run: {wandb_runs[-1]}")
        print(f"Upload it with:  wandb sync {wandb_runs[-1]}")


if __name__ == "__main__":
    main()
