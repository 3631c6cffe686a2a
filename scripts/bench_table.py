"""Tables, clocks and the machine line shared by the benchmark scripts (bench.py, bench_generation.py)."""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch
import transformers

from tetraformer.accel.chooser import cpu_model

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # cpu: this process's CPU seconds
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile")  # oneDNN's ISAs


def add_clock_option(parser: argparse.ArgumentParser) -> None:
    """--clock: wall seconds, or this process's CPU seconds (steadier ratios on a shared machine, one thread)."""
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="wall seconds, or this process's CPU seconds: steady on a busy machine with --threads 1",
    )


def format_rows(table: list[list[str]], markdown: bool, text_columns: int = 2) -> str:
    """A header row and data rows as an aligned plain-text table, or a README-ready markdown table.

    The first `text_columns` columns are left-aligned text; the rest are numbers, right-aligned.
    """
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    right = ":" if markdown else "-"  # markdown right-aligns the numeric columns
    rule = ["-" * w if i < text_columns else "-" * (w - 1) + right for i, w in enumerate(widths)]
    lines = []
    for row in (table[0], rule, *table[1:]):
        cells = [
            c.ljust(w) if i < text_columns else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(f"| {' | '.join(cells)} |" if markdown else "  ".join(cells))
    return "\n".join(lines)


def cpu_flags() -> list[str]:
    """The CPU's matmul-relevant instruction-set flags (from /proc/cpuinfo), and any oneDNN ISA cap in force."""
    try:
        line = next(x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("flags"))
        flags = [f for f in ISA_FLAGS if f in line.split(":", 1)[1].split()]
    except (OSError, StopIteration):
        flags = []
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    return flags + ([f"ONEDNN_MAX_CPU_ISA={cap}"] if cap else [])


def device_name(device: torch.device) -> str:
    """The device in words: GPU name, or CPU model and ISA flags, and the bf16 layout mode on CPUs."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    mode = os.environ.get("TETRAFORMER_BF16_LAYOUT", "auto")
    return f"{cpu_model()} [{' '.join(cpu_flags())}], bf16 Linear layouts: {mode}"


def machine(device: torch.device) -> str:
    """Versions, the device in words and the thread count, as one line."""
    return (
        f"torch {torch.__version__}, transformers {transformers.__version__}, python {platform.python_version()}, "
        f"device {device}: {device_name(device)}, {torch.get_num_threads()} threads"
    )
