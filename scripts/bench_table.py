"""Tables, clocks and the machine line shared by the benchmark scripts (bench.py, bench_generation.py)."""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch
import transformers

from tetraformer.accel.chooser import cpu_flags, cpu_model

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # cpu: this process's CPU seconds


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
