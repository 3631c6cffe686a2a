"""scripts/run_summary.py: throughput and MFU from a run's metrics.csv."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import run_summary  # noqa: E402

HEADER = "step,train/tokens_per_s,train/samples_per_s,train/mfu,train/mean_tokens_per_s,train/mean_samples_per_s,"
HEADER += "train/mean_mfu,train/peak_tflops\n"


def test_throughput_prefers_the_run_means_and_names_the_peak(tmp_path: Path) -> None:
    """The train/mean_* row wins over the per-interval rows; the MFU names the peak it was taken against."""
    metrics = tmp_path / "metrics.csv"
    metrics.write_text(HEADER + "1,100,10,0.1,,,,\n3,300,30,0.3,,,,\n3,,,,250,25,0.25,0.05\n")
    assert run_summary.throughput(metrics) == "250 tokens/s, 25.0 samples/s, MFU 25.00% of 0.05 TFLOP/s"


def test_throughput_falls_back_to_the_intervals_and_is_none_without_rates(tmp_path: Path) -> None:
    """Without the final row: the intervals' mean; without any rate: None."""
    metrics = tmp_path / "metrics.csv"
    metrics.write_text(HEADER + "1,100,10,,,,,\n3,300,30,,,,,\n")
    assert run_summary.throughput(metrics) == "200 tokens/s, 20.0 samples/s"
    metrics.write_text("step,val/loss\n1,2.0\n")
    assert run_summary.throughput(metrics) is None
