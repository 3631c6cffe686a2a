"""The report of a comparison: results.csv (a row per run), results.md (a row per variant), plots, a W&B summary."""

from __future__ import annotations

import csv
import json
import logging
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tetraformer.compare.curves import mean_curve, monitor_curve
from tetraformer.compare.result import RunResult
from tetraformer.training.reports import loggers
from tetraformer.training.reports.loggers import WandbMode
from tetraformer.training.reports.plots import bars_png, curves_png
from tetraformer.training.reports.tables import markdown_table

log = logging.getLogger(__name__)
RUN_COLUMNS = ["variant", "seed", "status", "params", "flops_per_token", "monitor", "best", "final"]
COST_COLUMNS = ["tokens_per_s", "mfu", "peak_memory_mb", "wall_s", "steps", "tokens"]
# which way is better for the columns of results.md that are not the task's metrics (None: not ranked)
COST_BETTER: dict[str, str | None] = {
    "tokens_per_s": "max",
    "mfu": "max",
    "peak_memory_mb": "min",
    "wall_s": "min",
    "steps": None,
    "tokens": None,
}
LOWER_IS_BETTER = ("loss", "perplexity", "ppl", "error", "cer", "wer", "bits_per_byte")


def write_report(out_dir: Path, results: list[RunResult], name: str, wandb_mode: WandbMode = "offline") -> list[Path]:
    """Write results.csv, results.md and the PNG plots to `out_dir`, log a W&B summary run; return the files."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    done = [r for r in results if r.status == "done"]
    summary_columns, summary_rows = variant_table(done)
    paths = [write_runs_csv(out_dir / "results.csv", results)]
    markdown = _markdown(name, summary_columns, summary_rows, done, results)
    (out_dir / "results.md").write_text(markdown, encoding="utf-8")
    paths.append(out_dir / "results.md")
    paths += write_plots(out_dir, done)
    _log_wandb(out_dir, name, wandb_mode, summary_columns, summary_rows, paths)
    log.info("comparison report written to %s", out_dir)
    return paths


def write_runs_csv(path: Path, results: list[RunResult]) -> Path:
    """One row per run: identity, size, the monitor's best and final, test metrics, lm-eval scores, costs,
    extrapolation, error."""
    tests = _keys(r.test for r in results)
    scores = _keys(r.evaluation for r in results)
    factors = _keys(r.extrapolation for r in results)
    columns = [*RUN_COLUMNS, *tests, *scores, *COST_COLUMNS, *(f"extrapolation/{f}" for f in factors)]
    columns += ["run_dir", "overrides", "error"]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for r in results:
            row = [r.variant, r.seed, r.status, r.params, r.flops_per_token, r.monitor, r.best, r.final]
            row += [(r.test or {}).get(k) for k in tests]
            row += [(r.evaluation or {}).get(k) for k in scores]
            row += [getattr(r, k) for k in COST_COLUMNS]
            row += [(r.extrapolation or {}).get(k) for k in factors]
            row += [str(r.run_dir), json.dumps(r.overrides, sort_keys=True), r.error or ""]
            writer.writerow(["" if v is None else v for v in row])
    return path


def variant_table(done: list[RunResult]) -> tuple[list[str], list[list[str]]]:
    """(columns, rows): a row per variant, each metric as mean ± std over its seeds, the best per column in bold."""
    if not done:
        return ["variant"], []
    monitor, mode = done[0].monitor, done[0].monitor_mode
    tests = _keys(r.test for r in done)
    scores = _keys(r.evaluation for r in done)
    metrics: list[tuple[str, Callable[[RunResult], Any], str | None]] = [
        ("params", lambda r: r.params, None),
        (f"best {monitor}", lambda r: r.best, mode),
        (f"final {monitor}", lambda r: r.final, mode),
        *((k, lambda r, k=k: (r.test or {}).get(k), _better(k, monitor, mode)) for k in tests),
        *((k, lambda r, k=k: (r.evaluation or {}).get(k), _better(k, "", mode)) for k in scores),
        *((k, lambda r, k=k: getattr(r, k), better) for k, better in COST_BETTER.items()),
    ]
    return _table(_by_variant(done), "seeds", metrics)


def extrapolation_table(done: list[RunResult]) -> tuple[list[str], list[list[str]]]:
    """(columns, rows): validation loss per variant at each length factor; a text (e.g. "n/a: ...") as it is."""
    factors = _keys(r.extrapolation for r in done)
    metrics = [(f, lambda r, f=f: (r.extrapolation or {}).get(f), "min") for f in factors]
    return _table(_by_variant([r for r in done if r.extrapolation]), "seeds", metrics)


def _table(
    groups: dict[str, list[RunResult]], count: str, metrics: list[tuple[str, Callable[[RunResult], Any], str | None]]
) -> tuple[list[str], list[list[str]]]:
    """Rows of "mean ± std" cells per group and metric, with the best mean of each ranked column in bold."""
    rows = [[variant, str(len(runs))] for variant, runs in groups.items()]
    for _, value, better in metrics:
        cells = [_summary([value(r) for r in runs]) for runs in groups.values()]
        means = [mean for mean, _ in cells]
        numbers = [m for m in means if isinstance(m, float)]
        best = (min if better == "min" else max)(numbers) if better and numbers else None
        for row, (mean, text) in zip(rows, cells, strict=True):
            row.append(f"**{text}**" if best is not None and mean == best else text)
    columns = ["variant", count, *(title for title, _, _ in metrics)]
    kept = [i for i, _ in enumerate(columns) if i < 2 or any(row[i] for row in rows)]  # drop unmeasured columns
    return [columns[i] for i in kept], [[row[i] for i in kept] for row in rows]


def _summary(values: list[Any]) -> tuple[float | str | None, str]:
    """(mean or the text value, "mean ± std" over the numbers; the text when a value is text; "" when none)."""
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    texts = [v for v in values if isinstance(v, str)]
    if not numbers:
        return (texts[0], texts[0]) if texts else (None, "")
    mean = statistics.fmean(numbers)
    if len(numbers) == 1:
        return mean, _number(mean)
    return mean, f"{_number(mean)} ± {_number(statistics.stdev(numbers))}"


def _number(value: float) -> str:
    """Whole numbers and large values with thousands separators, others with four significant digits."""
    return f"{value:,.0f}" if value.is_integer() or abs(value) >= 10_000 else f"{value:#.4g}".rstrip(".")


def _better(metric: str, monitor: str, mode: str) -> str:
    """Which way a test metric improves: the monitor's way for its test twin, else "min" for losses and errors."""
    if metric.split("/")[-1] == monitor.split("/")[-1]:
        return mode
    return "min" if any(word in metric.lower() for word in LOWER_IS_BETTER) else "max"


def _by_variant(results: list[RunResult]) -> dict[str, list[RunResult]]:
    """Results grouped by variant, variants in their first-seen order."""
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        groups.setdefault(r.variant, []).append(r)
    return groups


def _keys(dicts: Any) -> list[str]:
    """The keys of several optional dicts, in first-seen order."""
    return list(dict.fromkeys(k for d in dicts if d for k in d))


def _markdown(
    name: str, columns: list[str], rows: list[list[str]], done: list[RunResult], results: list[RunResult]
) -> str:
    """results.md: the variant table, the extrapolation table when measured, and the failed runs."""
    parts = [f"# Comparison: {name}\n", "Mean ± standard deviation over seeds; the best of each column in bold.\n"]
    parts.append(markdown_table(rows, columns) if rows else "No run finished.\n")
    if any(r.extrapolation for r in done):
        ext_columns, ext_rows = extrapolation_table(done)
        parts += [
            "## Length extrapolation\n",
            "Validation loss per token over the validation split at multiples of the training length.\n",
        ]
        parts.append(markdown_table(ext_rows, ext_columns))
    failed = [r for r in results if r.status != "done"]
    if failed:
        parts.append("## Failed runs\n")
        parts.append(markdown_table([[r.variant, r.seed, r.error or ""] for r in failed], ["variant", "seed", "error"]))
    return "\n".join(parts)


def write_plots(out_dir: Path, done: list[RunResult]) -> list[Path]:
    """The monitor against step and wall-clock time, the final monitor and the throughput as bars."""
    if not done:
        return []
    monitor = done[0].monitor
    groups = _by_variant(done)
    by_step, by_time = {}, {}
    for variant, runs in groups.items():
        curves = [monitor_curve(Path(r.run_dir), monitor) for r in runs]
        by_step[variant] = [mean_curve([(c.steps, c.values) for c in curves])]
        by_time[variant] = [(c.elapsed_s, c.values, None) for c in curves]  # a line per seed
    paths = [
        curves_png(by_step, out_dir / "monitor_vs_step.png", "step", monitor, f"{monitor} (mean ± std over seeds)"),
        curves_png(by_time, out_dir / "monitor_vs_time.png", "wall-clock seconds", monitor, f"{monitor}, each seed"),
    ]
    for stem, key, label in (("final_metric", "final", f"final {monitor}"), ("throughput", "tokens_per_s", "tokens/s")):
        cells = [_spread([getattr(r, key) for r in runs]) for runs in groups.values()]
        paths.append(
            bars_png(
                list(groups),
                [m for m, _ in cells],
                [s for _, s in cells],
                out_dir / f"{stem}.png",
                label,
                f"{label} (mean ± std over seeds)",
            )
        )
    if any(r.extrapolation for r in done):
        paths.append(extrapolation_png(out_dir / "extrapolation.png", groups))
    return paths


def extrapolation_png(path: Path, groups: dict[str, list[RunResult]]) -> Path:
    """Validation loss against the length factor per variant (mean ± std over seeds), where it was measured."""
    curves = {}
    for variant, runs in groups.items():
        measured = [m for m in (_measured_factors(r.extrapolation or {}) for r in runs) if m[0].size]
        if measured:
            curves[variant] = [mean_curve(measured)]
    return curves_png(curves, path, "length / training length", "validation loss", "length extrapolation")


def _measured_factors(losses: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(factors, losses) of the lengths a model could take ("2x" -> 2), the "n/a" ones left out."""
    found = {int(k.rstrip("x")): v for k, v in losses.items() if isinstance(v, float)}
    return np.array(list(found), dtype=np.int64), np.array(list(found.values()), dtype=np.float64)


def _spread(values: list[float | None]) -> tuple[float, float]:
    """(mean, standard deviation) of the numbers among the values; 0 deviation for one, NaN mean for none."""
    numbers = [float(v) for v in values if v is not None]
    if not numbers:
        return float("nan"), 0.0
    return statistics.fmean(numbers), statistics.stdev(numbers) if len(numbers) > 1 else 0.0


def _log_wandb(
    out_dir: Path, name: str, mode: WandbMode, columns: list[str], rows: list[list[str]], paths: list[Path]
) -> None:
    """One W&B run in the comparison's group holding the variant table and the plots (offline unless asked)."""
    resolved = loggers.wandb_mode(mode)
    if resolved == "disabled":
        return
    import wandb

    run = wandb.init(
        project="tetraformer",
        group=name,
        name=f"{name}-summary",
        job_type="compare-summary",
        dir=str(out_dir),
        mode=resolved,
        reinit="create_new",
    )
    images = {f"compare/{p.stem}": wandb.Image(str(p)) for p in paths if p.suffix == ".png"}
    run.log({"compare/summary": wandb.Table(columns=columns, data=rows), **images})
    run.finish()
    wandb.teardown()  # waits for the W&B service to write everything (offline finish alone may not)
