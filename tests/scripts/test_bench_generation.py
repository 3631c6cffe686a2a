"""scripts/bench_generation.py (`bench.py --generation` runs it): a row per setting, greedy outputs equal HF's."""

from __future__ import annotations

import sys
from pathlib import Path

import bench
import bench_generation
import pytest
import torch

TINY = ["--prompt-len", "5", "--new-tokens", "4", "--rounds", "1", "--warmup", "0", "--threads", "1"]


def test_generation_table_has_every_setting_and_equal_greedy_outputs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tiny run of all 8 settings prints a markdown row for each; greedy tokens equal transformers'."""
    monkeypatch.setattr(bench_generation, "SHAPE", dict(d_model=32, n_layers=2, n_heads=2, d_ff=64))
    monkeypatch.setattr(bench_generation, "VOCAB", 64)
    threads = torch.get_num_threads()
    try:
        bench_generation.main(["--markdown", *TINY])
    finally:
        torch.set_num_threads(threads)  # the script sets its own
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert lines[0].split("|")[1:-1] == [
        " model ",
        " search ",
        " batch ",
        " ours tok/s ",
        " HF tok/s ",
        " ratio ",
        " outputs equal ",
    ]
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines[2:]]
    settings = [
        (model, search, batch) for model in ("gpt2", "t5") for search in ("greedy", "beam4") for batch in ("1", "8")
    ]
    assert [tuple(row[:3]) for row in rows] == settings
    assert all(row[6] == "yes" for row in rows if row[1] == "greedy")
    assert all(float(row[5]) > 0 and float(row[3].replace(",", "")) > 0 for row in rows)


@pytest.mark.parametrize(
    ("argv", "script", "rest"),
    [
        (["--generation", "--markdown"], "bench_generation.py", ["--markdown"]),
        (["--long", "--tables", "attention"], "bench_long.py", ["--tables", "attention"]),
        (["--tasks", "seq2seq"], "bench_tasks.py", ["--tasks", "seq2seq"]),
    ],
)
def test_bench_flags_run_the_sibling_script_in_its_own_process(argv: list[str], script: str, rest: list[str]) -> None:
    """`bench.py --generation|--long|--tasks` runs that script with the other arguments (bench_tasks.py reads
    --tasks itself): a command line, not an import, so no script imports another."""
    command = bench.sibling_command(next(a for a in argv if a in bench.SIBLINGS), argv)
    assert command[0] == sys.executable and Path(command[1]).name == script and Path(command[1]).is_file()
    assert command[2:] == rest
