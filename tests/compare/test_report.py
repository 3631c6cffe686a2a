"""The comparison report: results.csv per run, results.md per variant (mean ± std, best in bold), plots, W&B."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PIL import Image
from wandb.proto import wandb_internal_pb2

from tests.training.wandb_records import _payloads, history_rows
from tetraformer.compare.report import write_report
from tetraformer.compare.result import RunResult

PLOTS = ["monitor_vs_step.png", "monitor_vs_time.png", "final_metric.png", "throughput.png"]


def fake_run(root: Path, variant: str, seed: int, losses: list[float], **fields: object) -> RunResult:
    """A finished run with a metrics.csv holding train rows and validation rows of val/loss every 10 steps."""
    run_dir = root / variant / f"seed{seed}"
    logs = run_dir / "logs" / "version_0"
    logs.mkdir(parents=True)
    with (logs / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["epoch", "step", "train/loss", "val/loss", "time/elapsed_s"])
        for index, loss in enumerate(losses):
            step = 10 * (index + 1)
            writer.writerow([0, step - 1, loss + 0.1, "", ""])
            writer.writerow([0, step, "", loss, 2.0 * step])
    values = {
        "params": 1000,
        "flops_per_token": 6000.0,
        "monitor": "val/loss",
        "monitor_mode": "min",
        "best": min(losses),
        "final": losses[-1],
        "tokens_per_s": 100.0,
        "mfu": None,
        "peak_memory_mb": 50.0,
        "wall_s": 60.0,
        "steps": 10 * len(losses),
        "tokens": 640 * len(losses),
        "test": {"test/loss": losses[-1]},
        **fields,
    }
    return RunResult(variant=variant, seed=seed, run_dir=str(run_dir), status="done", **values)  # type: ignore


@pytest.fixture
def results(tmp_path: Path) -> list[RunResult]:
    """Two variants x two seeds (alibi better on loss, learned faster), and one failed run."""
    return [
        fake_run(tmp_path, "alibi", 0, [2.0, 1.5, 1.0], tokens_per_s=100.0, wall_s=70.0),
        fake_run(tmp_path, "alibi", 1, [2.1, 1.6, 1.2], tokens_per_s=120.0, wall_s=74.0),
        fake_run(tmp_path, "learned", 0, [2.2, 1.9, 1.7], tokens_per_s=200.0, wall_s=50.0, peak_memory_mb=1637.2),
        fake_run(tmp_path, "learned", 1, [2.3, 2.0, 1.9], tokens_per_s=220.0, wall_s=52.0, peak_memory_mb=1637.0),
        RunResult(
            variant="learned",
            seed=2,
            run_dir=str(tmp_path / "learned/seed2"),
            status="failed",
            error="RuntimeError: out of memory",
        ),
    ]


def record(payload: bytes) -> wandb_internal_pb2.Record:
    """One record of an offline W&B run file."""
    parsed = wandb_internal_pb2.Record()
    parsed.ParseFromString(payload)
    return parsed


def md_rows(text: str) -> dict[str, dict[str, str]]:
    """The first Markdown table of results.md as {variant: {column: cell}}."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    columns = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != len(columns):
            break
        rows[cells[0]] = dict(zip(columns, cells, strict=True))
    return rows


def test_every_file_is_written(tmp_path: Path, results: list[RunResult]) -> None:
    """results.csv, results.md and four PNG plots that PIL can open."""
    paths = write_report(tmp_path / "out", results, "positions", wandb_mode="disabled")
    assert sorted(p.name for p in paths) == sorted(["results.csv", "results.md", *PLOTS])
    for name in PLOTS:
        with Image.open(tmp_path / "out" / name) as image:
            assert image.format == "PNG" and image.size[0] > 100


def test_results_csv_has_one_row_per_run(tmp_path: Path, results: list[RunResult]) -> None:
    """Every run, failed ones included, with its measurements and test metrics as columns."""
    write_report(tmp_path, results, "positions", wandb_mode="disabled")
    with (tmp_path / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["variant"], r["seed"], r["status"]) for r in rows] == [
        ("alibi", "0", "done"),
        ("alibi", "1", "done"),
        ("learned", "0", "done"),
        ("learned", "1", "done"),
        ("learned", "2", "failed"),
    ]
    for column in ("params", "best", "final", "test/loss", "tokens_per_s", "peak_memory_mb", "wall_s", "error"):
        assert column in rows[0]
    assert float(rows[1]["best"]) == pytest.approx(1.2)
    assert rows[4]["error"] == "RuntimeError: out of memory"


def test_results_md_means_stds_and_best(tmp_path: Path, results: list[RunResult]) -> None:
    """A row per variant with mean ± sample std over seeds; the lower loss, higher throughput, lower wall in bold."""
    write_report(tmp_path, results, "positions", wandb_mode="disabled")
    text = (tmp_path / "results.md").read_text()
    rows = md_rows(text)
    assert list(rows) == ["alibi", "learned"]
    assert rows["alibi"]["seeds"] == "2" and rows["learned"]["seeds"] == "2"  # the failed run is not averaged
    assert rows["alibi"]["best val/loss"] == "**1.100 ± 0.1414**"
    assert rows["learned"]["best val/loss"] == "1.800 ± 0.1414"
    assert rows["alibi"]["test/loss"].startswith("**")
    assert rows["learned"]["tokens_per_s"] == "**210 ± 14.14**"
    assert rows["alibi"]["tokens_per_s"] == "110 ± 14.14"
    assert rows["alibi"]["wall_s"] == "72 ± 2.828" and rows["learned"]["peak_memory_mb"] == "1637 ± 0.1414"
    assert rows["learned"]["wall_s"].startswith("**") and not rows["alibi"]["wall_s"].startswith("**")
    assert "**" not in rows["alibi"]["params"] + rows["learned"]["params"]  # size is not ranked
    assert "mfu" not in rows["alibi"]  # measured by no run
    assert "## Failed runs" in text and "RuntimeError: out of memory" in text
    assert "Length extrapolation" not in text


def test_higher_monitor_is_better_in_max_mode(tmp_path: Path) -> None:
    """With an accuracy monitor (mode max) the higher mean is the one in bold."""
    results = [
        fake_run(tmp_path, name, 0, [acc], monitor="val/acc", monitor_mode="max")
        for name, acc in (("a", 0.7), ("b", 0.9))
    ]
    write_report(tmp_path / "out", results, "families", wandb_mode="disabled")
    rows = md_rows((tmp_path / "out" / "results.md").read_text())
    assert rows["b"]["final val/acc"] == "**0.9000**" and rows["a"]["final val/acc"] == "0.7000"


def test_extrapolation_table(tmp_path: Path) -> None:
    """Variant x length factor in results.md, the lowest loss per factor in bold, a "n/a" reason kept as text."""
    reason = "n/a: learned positions cover 16 tokens"
    results = [
        fake_run(tmp_path, "rotary", 0, [1.0], extrapolation={"1x": 1.0, "2x": 1.5, "4x": 2.5}),
        fake_run(tmp_path, "learned", 0, [1.1], extrapolation={"1x": 0.9, "2x": reason, "4x": reason}),
    ]
    write_report(tmp_path / "out", results, "positions", wandb_mode="disabled")
    text = (tmp_path / "out" / "results.md").read_text()
    table = text.split("## Length extrapolation")[1]
    rows = md_rows(table)
    assert rows["rotary"]["1x"] == "1" and rows["learned"]["1x"] == "**0.9000**"
    assert rows["rotary"]["2x"] == "**1.500**" and rows["learned"]["4x"] == reason
    with (tmp_path / "out" / "results.csv").open(newline="") as f:
        assert next(csv.DictReader(f))["extrapolation/4x"] == "2.5"
    with Image.open(tmp_path / "out" / "extrapolation.png") as image:
        assert image.format == "PNG"


def test_wandb_summary_run_offline(tmp_path: Path, results: list[RunResult]) -> None:
    """One offline W&B run in the comparison's group logs the summary table and the plots."""
    write_report(tmp_path, results, "positions", wandb_mode="offline")
    run_files = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(run_files) == 1
    runs = [r.run for r in map(record, _payloads(run_files[0].read_bytes())) if r.WhichOneof("record_type") == "run"]
    assert runs and runs[0].run_group == "positions" and runs[0].display_name == "positions-summary"
    keys = [key for row in history_rows(run_files[0]) for key in row]  # media keys come as NAME/_type, ...
    for name in ("compare/summary", "compare/monitor_vs_step", "compare/throughput"):
        assert any(key.startswith(f"{name}/") for key in keys), name
    (table,) = run_files[0].parent.glob("files/media/table/compare/summary_*.table.json")
    data = json.loads(table.read_text())
    assert data["columns"][:2] == ["variant", "seeds"] and [row[0] for row in data["data"]] == ["alibi", "learned"]


def test_lm_eval_scores_are_columns_ranked_their_way(tmp_path: Path) -> None:
    """`evaluate:` scores: a column per task metric in results.csv and results.md, accuracy ranked highest first,
    perplexity and bits per byte lowest first; a run without them leaves their cells empty."""
    scored = {"quiz/acc": 0.6, "text/word_perplexity": 30.0, "text/bits_per_byte": 2.0}
    worse = {"quiz/acc": 0.4, "text/word_perplexity": 40.0, "text/bits_per_byte": 2.5}
    results = [
        fake_run(tmp_path, "alibi", 0, [2.0, 1.5], evaluation=scored),
        fake_run(tmp_path, "learned", 0, [2.2, 1.9], evaluation=worse),
        fake_run(tmp_path, "rotary", 0, [2.1, 1.8]),
    ]
    write_report(tmp_path / "out", results, "positions", wandb_mode="disabled")
    with (tmp_path / "out" / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["quiz/acc"] for row in rows] == ["0.6", "0.4", ""]
    table = md_rows((tmp_path / "out" / "results.md").read_text())
    assert table["alibi"]["quiz/acc"] == "**0.6000**" and table["learned"]["quiz/acc"] == "0.4000"
    assert table["alibi"]["text/word_perplexity"].startswith("**") and table["alibi"]["text/bits_per_byte"] == "**2**"
    assert table["rotary"]["quiz/acc"] == ""
