"""Tables and the machine line shared by the benchmark scripts (bench.py, bench_generation.py)."""

from __future__ import annotations

import platform

import torch
import transformers


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
            c.ljust(w) if i < text_columns else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(f"| {' | '.join(cells)} |" if markdown else "  ".join(cells))
    return "\n".join(lines)


def machine(device: torch.device) -> str:
    """Versions, device name and thread count, as one line."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
    return (
        f"torch {torch.__version__}, transformers {transformers.__version__}, device {device} "
        f"({name or platform.machine()}), {torch.get_num_threads()} threads"
    )
