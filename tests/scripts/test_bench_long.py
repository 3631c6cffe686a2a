"""scripts/bench_long.py: cells sized as documented, and both tables printed with a row per cell at tiny lengths."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import bench_long
import pytest

FAMILIES = ("bert", "gpt", "t5", "vit")


def test_cells_fill_the_tokens_per_step_and_vit_lengths_are_square_patch_grids() -> None:
    """batch = tokens // T (at least 1); ViT's T is a square patch count; T5's targets are T/4 or T."""
    assert bench_long.model_cell("gpt", 1024, 4096, "quarter") == bench_long.ModelCell("gpt", 1024, 4, 0)
    assert bench_long.model_cell("bert", 8192, 4096, "quarter").batch == 1
    vit = bench_long.model_cell("vit", 2048, 4096, "quarter")
    assert (vit.length, vit.batch) == (45**2, 2)
    assert bench_long.model_cell("t5", 1024, 4096, "quarter").target == 256
    t5 = bench_long.model_cell("t5", 1024, 4096, "full")
    assert t5.target == 1024 and t5.tokens == 4 * 2048


def test_quadratic_kernels_need_memory_growing_as_t_squared_and_flash_as_t() -> None:
    """Doubling T about quadruples the math and eager estimates and doubles the flash one."""
    cpu = bench_long.torch.device("cpu")
    for kernel, growth in (("math", 4), ("eager", 4), ("flash", 2)):
        small, large = (bench_long.attention_bytes(kernel, t, cpu) for t in (4096, 8192))
        assert large / small == pytest.approx(growth, rel=0.05)


def rows_of(text: str, header: str) -> list[list[str]]:
    """The data rows of the markdown table whose header row starts with `header`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header}"))
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip("|").split("|")])
    return table


def number(cell: str) -> float:
    """A table cell's number (thousands separators allowed)."""
    return float(cell.replace(",", ""))


def run_tiny(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """bench_long's output for `argv` at tiny settings, where too little free memory skips the quadratic kernels at
    T = 64 (math at 64 needs more than twice flash's estimate)."""
    monkeypatch.setenv("TETRAFORMER_CACHE_DIR", str(tmp_path))
    limit = bench_long.attention_bytes("flash", 64, bench_long.torch.device("cpu"))
    monkeypatch.setattr(bench_long, "free_bytes", lambda device: 2 * limit)
    threads = bench_long.torch.get_num_threads()
    try:
        with bench_long.torch.random.fork_rng():  # the cells seed; the test process's RNG stays as it was
            bench_long.main(
                [
                    *argv,
                    "--tokens",
                    "64",
                    "--attn-dtypes",
                    "fp32",
                    "--steps",
                    "1",
                    "--rounds",
                    "1",
                    "--calls",
                    "1",
                    "--threads",
                    "1",
                    "--markdown",
                ]
            )
    finally:
        bench_long.torch.set_num_threads(threads)
    return capsys.readouterr().out


@pytest.mark.slow  # trains each family's pair of models a few steps, one cell in a spawned process
def test_tiny_run_prints_a_row_per_family_length_and_kernel(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Both tables at T = 32 (ViT: 36) and attention at 32 and 64: every cell goes through in_child, the first (BERT's
    memory) in a fresh spawned process and the rest in this one (one spawn proves the mechanism; each costs a
    fresh interpreter's imports): every row present, measured cells positive, quadratic kernels skipped at 64."""
    cells, in_child = [], bench_long.in_child

    def first_spawned(fn: Callable, *args: object) -> object:
        """The first cell through bench_long's own in_child, the others called here."""
        cells.append(fn)
        return in_child(fn, *args) if len(cells) == 1 else fn(*args)

    monkeypatch.setattr(bench_long, "in_child", first_spawned)
    out = run_tiny(["--lengths", "32", "--attn-lengths", "32", "64"], monkeypatch, tmp_path, capsys)
    assert "torch " in out and "fresh spawned process" in out
    models = rows_of(out, "family")
    assert [(r[0], r[1], r[2]) for r in models] == [(f, "bf16", "36" if f == "vit" else "32") for f in FAMILIES]
    for row in models:
        assert number(row[4]) > 0 and number(row[5]) > 0  # tokens/s
        assert number(row[7]) >= 0 and number(row[8]) >= 0  # MiB: BERT's "ours" came back from the spawned process
    attention = rows_of(out, "dtype")
    assert [(r[0], r[1]) for r in attention] == [("fp32", "32"), ("fp32", "64")]
    assert all(number(c) >= 0 for c in attention[0][2:])
    assert attention[1][2].startswith("skipped (needs") and attention[1][4].startswith("skipped (needs")
    assert number(attention[1][6]) > 0  # flash still runs
    family = [bench_long.memory_cell, bench_long.memory_cell, bench_long.time_cell]
    assert cells == family * len(FAMILIES) + [bench_long.attention_cell] * 4  # math, eager, flash at 32; flash at 64
