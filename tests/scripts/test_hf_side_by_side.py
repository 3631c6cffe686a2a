"""scripts/hf_side_by_side.py: both sides of a smoke run train and score; the table reads the records."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import hf_side_by_side
import hf_side_by_side_runs
import pytest

from tetraformer.cli import main as tetraformer

TEXT = "First Citizen: Before we proceed any further, hear me speak.\nAll: Speak, speak.\n"


@pytest.mark.slow  # a child process for HF's run
def test_gpt_smoke_run_gives_both_sides_a_finite_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPT family at the smoke size on a small text: `tetraformer prepare` (here in this process, on the cache
    the runs share) then ours (here) and HF (in its child process: one child proves the mechanism, each costs a
    fresh interpreter's imports) train 3 steps and score a finite loss."""
    text = tmp_path / "data" / "shakespeare"
    text.mkdir(parents=True)
    for split in ("train", "val"):
        (text / f"{split}.txt").write_text(TEXT * 60, encoding="utf-8")
    monkeypatch.setenv("TETRAFORMER_CACHE_DIR", str(tmp_path / "cache"))  # the children's too (runs_env keeps it)
    prepared = []
    monkeypatch.setattr(
        hf_side_by_side, "prepare_stores", lambda config, env: prepared.append(config) or in_process(config)
    )
    monkeypatch.setattr(hf_side_by_side, "run_children", ours_in_process(hf_side_by_side.run_children))
    argv = ["--families", "gpt", "--size", "smoke", "--seeds", "1", "--data", str(tmp_path / "data")]
    results = hf_side_by_side.main([*argv, "--work", str(tmp_path / "work")])
    assert len(prepared) == 1
    for side in ("ours", "hf"):
        (record,) = results["gpt"][side]
        assert record["steps"] == 3
        assert math.isfinite(record["loss"]) and record["loss"] > 0
        assert record["wall_s"] > 0 and record["cpu_s"] > 0


def ours_in_process(run_children: Callable[..., list[dict]]) -> Callable[..., list[dict]]:
    """run_children with "ours" runs done in this process (hf_side_by_side_runs.run_ours), the others as it does."""

    def run(runs: list[tuple[str, int]], family: str, config: Path, options: list[str], env: dict) -> list[dict]:
        children = iter(run_children([run for run in runs if run[0] != "ours"], family, config, options, env))
        records = []
        for side, seed in runs:
            if side != "ours":
                records.append(next(children))
                continue
            out = config.parent / f"{family}-ours-{seed}.json"
            hf_side_by_side_runs.run_ours(family, config, seed, out, int(options[0]) or None)
            records.append(json.loads(out.read_text()))
        return records

    return run


def in_process(config: Path) -> None:
    """`tetraformer prepare -c CONFIG` in this process."""
    tetraformer(["prepare", "-c", str(config)])


def test_table_gives_mean_and_spread_per_side_and_the_time_ratio() -> None:
    """Metric as mean ± std over seeds; wall and CPU seconds as medians, each with ours/HF as their ratio."""
    results = {
        "bert": {
            "ours": [
                {"accuracy": 0.90, "wall_s": 10.0, "cpu_s": 9.0},
                {"accuracy": 0.92, "wall_s": 12.0, "cpu_s": 9.0},
            ],
            "hf": [{"accuracy": 0.80, "wall_s": 20.0, "cpu_s": 6.0}, {"accuracy": 0.80, "wall_s": 20.0, "cpu_s": 6.0}],
        }
    }
    lines = hf_side_by_side.table(results).splitlines()
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    assert cells[:4] == ["bert", "val accuracy", "0.9100 ± 0.0141", "0.8000 ± 0.0000"]
    assert cells[4:] == ["11.0", "20.0", "0.55", "9.0", "6.0", "1.50"]
