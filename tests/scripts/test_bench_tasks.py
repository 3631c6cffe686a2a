"""scripts/bench_tasks.py: a tiny fit of one task against its bare steps gives a sane report."""

from __future__ import annotations

from pathlib import Path

import bench_tasks
import pytest

pytestmark = pytest.mark.slow  # every test here runs the CLI

TEXT = "First Citizen: Before we proceed any further, hear me speak.\n"


def test_tiny_language_model_bench_reports_positive_rates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rounds of 3 timed steps on a small text: every field set, rates positive, overheads finite."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT * 40, encoding="utf-8")
    args = bench_tasks.parse_args(["--tasks", "language_modeling", "--steps", "3", "--warmup", "1", "--rounds", "2"])
    extra = [
        "--data.train_path",
        str(corpus),
        "--data.val_path",
        str(corpus),
        "--data.block_size",
        "16",
        "--model.arch.n_layers",
        "1",
        "--model.arch.d_model",
        "32",
        "--model.arch.d_ff",
        "64",
    ]
    result = bench_tasks.bench_task("language_modeling", args, tmp_path, extra)
    assert (result.task, result.unit, result.steps, result.rounds) == ("language_modeling", "tokens", 3, 2)
    assert result.items == 3 * 16 * 16  # 3 batches of 16 blocks of 16 tokens
    assert result.loop_rate > 0 and result.bare_rate > 0 and result.loop_s > 0 and result.bare_s > 0
    assert -1 < result.overhead < 100 and -1 < result.cpu_overhead < 100
    table = bench_tasks.format_table([result], markdown=True).splitlines()
    assert [c.strip() for c in table[0].split("|")[1:7]] == [
        "task",
        "unit",
        "loop items/s",
        "bare items/s",
        "overhead",
        "CPU overhead",
    ]
    assert [c.strip() for c in table[2].split("|")[1:3]] == ["language_modeling", "tokens"]
