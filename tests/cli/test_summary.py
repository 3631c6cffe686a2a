"""`tetraformer summary RUN_DIR` (tetraformer.cli.summary): throughput and MFU from a run's metrics.csv."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetraformer.cli import summary
from tetraformer.errors import ConfigError

HEADER = "step,train/tokens_per_s,train/samples_per_s,train/mfu,train/mean_tokens_per_s,train/mean_samples_per_s,"
HEADER += "train/mean_mfu,train/peak_tflops\n"


def test_throughput_prefers_the_run_means_and_names_the_peak(tmp_path: Path) -> None:
    """The train/mean_* row wins over the per-interval rows; the MFU names the peak it was taken against."""
    metrics = tmp_path / "metrics.csv"
    metrics.write_text(HEADER + "1,100,10,0.1,,,,\n3,300,30,0.3,,,,\n3,,,,250,25,0.25,0.05\n")
    assert summary.throughput(metrics) == "250 tokens/s, 25.0 samples/s, MFU 25.00% of 0.05 TFLOP/s"


def test_throughput_falls_back_to_the_intervals_and_is_none_without_rates(tmp_path: Path) -> None:
    """Without the final row: the intervals' mean; without any rate: None."""
    metrics = tmp_path / "metrics.csv"
    metrics.write_text(HEADER + "1,100,10,,,,,\n3,300,30,,,,,\n")
    assert summary.throughput(metrics) == "200 tokens/s, 20.0 samples/s"
    metrics.write_text("step,val/loss\n1,2.0\n")
    assert summary.throughput(metrics) is None


def test_summary_names_the_run_files_throughput_and_losses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run directory's checkpoints, newest metrics.csv, its rates, val/loss by step and the W&B sync command."""
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"")
    metrics = tmp_path / "logs" / "version_0" / "metrics.csv"
    metrics.parent.mkdir(parents=True)
    metrics.write_text("step,train/tokens_per_s,train/samples_per_s,val/loss\n1,100,10,\n2,,,2.5\n4,,,1.25\n")
    (tmp_path / "wandb" / "offline-run-1").mkdir(parents=True)
    summary.summary_main([str(tmp_path)])
    out = capsys.readouterr().out
    assert f"Checkpoint:      {tmp_path / 'checkpoints' / 'last.ckpt'}" in out
    assert f"Metrics (CSV):   {metrics}" in out and "Throughput:      100 tokens/s, 10.0 samples/s" in out
    assert "val/loss by step 2:2.500  4:1.250" in out
    assert f"wandb sync {tmp_path / 'wandb' / 'offline-run-1'}" in out


def test_summary_of_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    """A RUN_DIR that is not there names itself and what to give instead."""
    with pytest.raises(ConfigError, match="no-run: no such run directory"):
        summary.summary_main([str(tmp_path / "no-run")])
