"""What a finished run measured: size and FLOPs from its checkpoint, metrics from its metrics.csv files."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import yaml

from tetraformer.compare.result import RunResult
from tetraformer.core.accounting import count_params, flops_per_token
from tetraformer.payload import read_checkpoint
from tetraformer.training.checkpointing.loading import load_network

CUDA_PEAK = "system/cuda_max_allocated_mb"


def read_metrics(path: Path) -> list[dict[str, float]]:
    """The rows of a Lightning metrics.csv, each with only its filled cells, as floats."""
    with path.open(encoding="utf-8") as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]


def latest_metrics(root: Path) -> list[dict[str, float]]:
    """The rows of the newest ROOT/logs/version_N/metrics.csv (empty when there is none)."""
    versions = sorted(root.glob("logs/version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    return read_metrics(versions[-1]) if versions else []


def column(rows: list[dict[str, float]], key: str) -> list[float]:
    """The finite values of one metric, in logged order."""
    return [row[key] for row in rows if key in row and math.isfinite(row[key])]


def mean(values: list[float]) -> float | None:
    """Their mean, None when there are none."""
    return sum(values) / len(values) if values else None


def test_metrics(run_dir: Path) -> dict[str, float]:
    """The test/... metrics of the run's latest `tetraformer test` (RUN_DIR/eval/test-N)."""
    evals = sorted(run_dir.glob("eval/test-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    rows = latest_metrics(evals[-1]) if evals else []
    return {k: v for row in rows for k, v in row.items() if k.startswith("test/")}


def measure_run(result: RunResult, run_dir: Path, peak_rss_mb: float) -> None:
    """Fill `result` from the run directory a finished `tetraformer fit` (and test) left."""
    run = (yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")) or {}).get("run") or {}
    result.monitor, result.monitor_mode = run.get("monitor", "val/loss"), run.get("monitor_mode", "min")
    rows = latest_metrics(run_dir)
    monitored = column(rows, result.monitor)
    if monitored:
        result.best = min(monitored) if result.monitor_mode == "min" else max(monitored)
        result.final = monitored[-1]
    result.tokens_per_s = mean(column(rows, "train/tokens_per_s"))
    result.mfu = mean(column(rows, "train/mfu"))
    cuda_peak = column(rows, CUDA_PEAK)
    result.peak_memory_mb = max(cuda_peak) if cuda_peak else peak_rss_mb
    last = read_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    result.steps = int(last["global_step"])
    result.tokens = int(last.get("callbacks", {}).get("Throughput", {}).get("tokens_seen", 0))
    net, _ = load_network(run_dir / "checkpoints" / "best.ckpt")
    result.params = count_params(net)
    result.flops_per_token = flops_per_token(net, net.cfg.max_len)
    if (run_dir / "eval").is_dir():
        result.test = test_metrics(run_dir)
