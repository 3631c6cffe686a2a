"""A comparison of tiny language models end to end: one fit (+ test) per run, results, restarts.

The finished variant's fit is a subprocess, as the runner starts every run (its peak RSS comes from the process); the
broken variant's fit and the test run in this process (each fresh process costs ~6 s of imports), their output in
the run's log as a process's would be."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.evaluation.harness_tasks import CHOICE, write_tasks
from tests.evaluation.harness_tasks import TEXT as TEXT_TASK
from tests.tasks.language_modeling.conftest import TEXT, tiny_config
from tetraformer.cli import main
from tetraformer.compare.measure import CUDA_PEAK, measure_run
from tetraformer.compare.report import write_report
from tetraformer.compare.result import RESULT_FILE, RunResult, read_result
from tetraformer.compare.runner import Launched, budget_flags, fit_args, launch, run_comparison, unchanged
from tetraformer.compare.spec import Budget, load_spec

VARIANTS = [
    {"name": "rotary", "overrides": {"model.init_args.arch.position": "rotary"}},
    {"name": "alibi", "overrides": {"model.arch.position": "alibi", "model.arch.n_layers": 1}},
]
ALIBI = VARIANTS[1]
BROKEN = {"name": "broken", "overrides": {"model.init_args.arch.position": "nonsense"}}


class CountingLauncher:
    """`launch`, counting the runs it starts."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, args: list[str], log_file: Path) -> Launched:
        self.commands.append(args)
        return launch(args, log_file)


class OneProcessLauncher(CountingLauncher):
    """`launch` for fits that train; the other commands (a fit that fails, a test) in this process, their stderr
    written to the log (the last line is what the runner reads)."""

    def __call__(self, args: list[str], log_file: Path) -> Launched:
        if args[0] == "fit" and "nonsense" not in args:
            return super().__call__(args, log_file)
        self.commands.append(args)
        with log_file.open("a", encoding="utf-8") as out, contextlib.redirect_stderr(out):
            try:
                main(args)
                code = 0
            except SystemExit as ended:
                code = ended.code if isinstance(ended.code, int) else 1
        lines = [line for line in log_file.read_text(encoding="utf-8").splitlines() if line.strip()]
        return Launched(code, 0.0, lines[-1] if lines else "")


class FailingLauncher(CountingLauncher):
    """Records each run's command line and fails it at once, without starting a process."""

    def __call__(self, args: list[str], log_file: Path) -> Launched:
        self.commands.append(args)
        return Launched(1, 0.0, "error: no data here")


def write_comparison(root: Path, variants: list[dict[str, Any]], **fields: Any) -> Path:
    """A tiny LM base config on the fixture text and a comparison file naming it."""
    corpus = root / "corpus.txt"
    corpus.write_text(TEXT * 12, encoding="utf-8")
    data = {"train_path": str(corpus), "val_path": str(corpus), "test_path": str(corpus), "documents": "line"}
    base = tiny_config(root / "unused", **data)
    base["trainer"]["val_check_interval"] = 2
    (root / "base.yaml").write_text(yaml.safe_dump(base))
    spec = {"base": "base.yaml", "variants": variants, "seeds": 1, "budget": {"max_steps": 4}, **fields}
    path = root / "tiny_lm.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def compared(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, list[RunResult], CountingLauncher]]:
    """A variant whose override is invalid, then a tiny LM variant, run once with tests (shared, read-only).

    One finished variant is enough: every run gets the same command-line budget (test_budgets_are_equal reads the
    commands), and the runs of several variants differ only in their overrides (test_shared_overrides...)."""
    root = tmp_path_factory.mktemp("compare")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "disabled")
        spec = load_spec(write_comparison(root, [BROKEN, ALIBI], test=True, extrapolation=[1, 2]))
        launcher = OneProcessLauncher()
        results = run_comparison(spec, root / "out", launcher)
        yield root, results, launcher


def test_each_run_writes_a_result_with_the_schema(
    compared: tuple[Path, list[RunResult], CountingLauncher],
) -> None:
    """Every finished run has OUT/<variant>/seed0/result.json with all RunResult keys, measured."""
    root, results, launcher = compared
    assert [(r.variant, r.status) for r in results] == [("broken", "failed"), ("alibi", "done")]
    keys = {f.name for f in dataclasses.fields(RunResult)}
    for result in results[1:]:
        run_dir = root / "out" / result.variant / "seed0"
        stored = json.loads((run_dir / RESULT_FILE).read_text())
        assert set(stored) == keys and stored == result.to_dict()
        assert (run_dir / "checkpoints" / "best.ckpt").is_file() and (run_dir / "config.yaml").is_file()
        assert result.monitor == "val/loss" and result.monitor_mode == "min"
        assert result.best is not None and result.final is not None and result.best <= result.final
        assert result.params > 0 and result.flops_per_token > 6 * result.params / 2
        assert result.tokens_per_s and result.tokens_per_s > 0 and result.peak_memory_mb > 50
        assert "test/loss" in result.test and result.wall_s > 0
        assert result.extrapolation is not None and set(result.extrapolation) == {"1x", "2x"}
        assert all(isinstance(loss, float) and loss > 0 for loss in result.extrapolation.values())
    arch = yaml.safe_load((root / "out" / "alibi" / "seed0" / "config.yaml").read_text())["model"]["init_args"]["arch"]
    assert arch["position"] == "alibi" and arch["n_layers"] == 1  # the variant's overrides reached its run
    assert [args[0] for args in launcher.commands] == ["fit", "fit", "test"]


def test_budgets_are_equal(compared: tuple[Path, list[RunResult], CountingLauncher]) -> None:
    """Every run trains exactly the budget's steps, hence the same tokens."""
    _, results, launcher = compared
    done = [r for r in results if r.done]
    assert [r.steps for r in done] == [4]
    assert done[0].tokens == 4 * 8 * 16  # 8 blocks of 16 tokens a step
    fits = [args for args in launcher.commands if args[0] == "fit"]
    assert len(fits) == 2 and all(args[args.index("--trainer.max_steps") + 1] == "4" for args in fits)


def test_a_failed_run_records_its_error_and_the_rest_go_on(
    compared: tuple[Path, list[RunResult], CountingLauncher],
) -> None:
    """The broken variant's result says failed with the error's last line; the run after it finished."""
    root, results, _ = compared
    broken = read_result(root / "out" / "broken" / "seed0")
    assert broken is not None and broken.status == "failed"
    assert broken.error is not None and "nonsense" in broken.error and "\n" not in broken.error


def test_a_restart_skips_finished_runs_and_reruns_failed_ones(
    compared: tuple[Path, list[RunResult], CountingLauncher],
) -> None:
    """Run again: the done runs are read back, only the failed one launches again."""
    root, results, _ = compared
    launcher = FailingLauncher()  # the broken run fails again, here without a process (the fixture's failed in one)
    again = run_comparison(load_spec(root / "tiny_lm.yaml"), root / "out", launcher)
    assert [args[0] for args in launcher.commands] == ["fit"]
    assert "nonsense" in launcher.commands[0]
    assert again[1:] == results[1:] and again[0].status == "failed"


def test_compare_command_reports_every_run(
    compared: tuple[Path, list[RunResult], CountingLauncher], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tetraformer compare -c FILE --budget.max_steps 4 --seeds 1 --out DIR`: skips done runs, reports."""
    root, _, _ = compared
    launched = CountingLauncher()
    monkeypatch.setattr("tetraformer.cli.compare.run_comparison", counted_comparison(launched))
    spec = {"base": "base.yaml", "variants": [ALIBI], "budget": {"max_steps": 99}, "extrapolation": [1, 2]}
    path = root / "done_only.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = root / "out"
    main(["compare", "-c", str(path), "--budget.max_steps", "4", "--seeds", "1", "--out", str(out)])
    assert launched.commands == []
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["variant"], r["seed"], r["status"]) for r in rows] == [("alibi", "0", "done")]
    assert "| alibi |" in (out / "results.md").read_text().replace("**", "")


def test_compare_exits_non_zero_when_a_run_failed(
    compared: tuple[Path, list[RunResult], CountingLauncher],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A comparison with a failed run (the done ones skipped, the broken one run again) exits 1 with one line that
    counts the failures and names the report."""
    root, _, _ = compared
    path = root / "with_broken.yaml"
    path.write_text(yaml.safe_dump({"base": "base.yaml", "variants": [BROKEN, ALIBI], "budget": {"max_steps": 4}}))
    out = root / "out"
    launcher = FailingLauncher()  # the broken run fails again, here without a process (the fixture's failed in one)
    monkeypatch.setattr("tetraformer.cli.compare.run_comparison", counted_comparison(launcher))
    with pytest.raises(SystemExit) as ended:
        main(["compare", "-c", str(path), "--out", str(out)])
    assert ended.value.code == 1 and [args[0] for args in launcher.commands] == ["fit"]
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == f"error: 1 of 2 runs failed: see {out / 'results.md'} and each run's fit.log"


def test_shared_overrides_reach_every_run_and_all_failing_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`compare -c FILE --data.train_path X --model.arch.d_model=48`: every run's fit gets the file's shared
    overrides and the command line's, besides its own; when every run fails the one line says all did."""
    path = write_comparison(tmp_path, VARIANTS, overrides={"data.block_size": 16})
    launcher = FailingLauncher()
    monkeypatch.setattr("tetraformer.cli.compare.run_comparison", counted_comparison(launcher))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    argv = ["compare", "-c", str(path), "--out", str(tmp_path / "out"), "--data.train_path", "x.txt"]
    with pytest.raises(SystemExit) as ended:
        main([*argv, "--model.arch.d_model=48"])
    assert ended.value.code == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: all 2 runs failed: see ")
    for command, variant in zip(launcher.commands, VARIANTS, strict=True):
        flags = dict(zip(command[3::2], command[4::2], strict=True))  # after `fit -c BASE`: --key value pairs
        assert flags["--data.block_size"] == "16" and flags["--data.train_path"] == "x.txt"
        assert flags["--model.arch.d_model"] == "48"
        assert all(flags[f"--{key}"] == value for key, value in variant["overrides"].items() if isinstance(value, str))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["stray"], "unexpected argument 'stray'"),
        (["--data.train_path"], "--data.train_path: give it a value"),
        (["--model.arch", "{d_model: 8}"], "is also variant 'rotary''s model.init_args.arch.position"),
    ],
)
def test_wrong_shared_overrides_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    """A stray word, a flag without its value, a shared key a variant varies: one line, exit 2, nothing run."""
    path = write_comparison(tmp_path, VARIANTS)
    with pytest.raises(SystemExit) as ended:
        main(["compare", "-c", str(path), "--out", str(tmp_path / "out"), *extra])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not (tmp_path / "out").exists()


def counted_comparison(launcher: CountingLauncher) -> Callable[..., list[RunResult]]:
    """run_comparison with `launcher` starting its runs."""
    return lambda spec, out: run_comparison(spec, out, launcher)


def test_a_done_run_with_changed_settings_runs_again(
    compared: tuple[Path, list[RunResult], CountingLauncher],
) -> None:
    """A restart skips a done run only when its fit command line (overrides, seed, budget) is unchanged."""
    root, _, _ = compared
    spec = load_spec(root / "tiny_lm.yaml")
    run_dir = root / "out" / "alibi" / "seed0"
    assert unchanged(run_dir, fit_args(spec, spec.variants[1], 0, run_dir))
    longer = load_spec(root / "tiny_lm.yaml", budget={"max_steps": 8})
    assert not unchanged(run_dir, fit_args(longer, longer.variants[1], 0, run_dir))
    assert not unchanged(run_dir, fit_args(spec, spec.variants[1], 1, run_dir))


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (
            Budget(max_steps=7),
            {"--trainer.max_steps": "7", "--trainer.max_epochs": "-1", "--trainer.max_time": "null"},
        ),
        (Budget(max_time="00:02:00"), {"--trainer.max_steps": "-1", "--trainer.max_time": "00:02:00"}),
        (
            Budget(tokens=5000),
            {"--trainer.max_steps": "-1", "--trainer.max_time": "null", "--run.max_tokens": "5000"},
        ),
    ],
)
def test_budget_flags_leave_no_other_limit(budget: Budget, expected: dict[str, str]) -> None:
    """Each budget sets its own limit and lifts the base config's others (epochs, steps, time)."""
    flags = budget_flags(budget)
    given = dict(zip(flags[::2], flags[1::2], strict=True))
    assert given["--trainer.max_epochs"] == "-1"
    assert expected.items() <= given.items()


def test_peak_memory_is_cuda_max_allocated_when_the_run_logged_it(
    compared: tuple[Path, list[RunResult], CountingLauncher], tmp_path: Path
) -> None:
    """A run on a GPU logs system/cuda_max_allocated_mb (Throughput): its largest value is the peak, not the
    process's RSS; a CPU run (no such column) keeps the RSS."""
    root, results, _ = compared
    run_dir = shutil.copytree(root / "out" / "alibi" / "seed0", tmp_path / "run")
    metrics = next(run_dir.glob("logs/version_*/metrics.csv"))
    with metrics.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    columns = [*rows[0].keys(), CUDA_PEAK]
    val_rows = [row for row in rows if row.get("val/loss")]
    for row, peak in zip(val_rows, (812.5, 1024.25), strict=False):
        row[CUDA_PEAK] = str(peak)
    with metrics.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    on_gpu = RunResult("alibi", 0, str(run_dir), "done")
    measure_run(on_gpu, run_dir, peak_rss_mb=3000.0)
    assert len(val_rows) >= 2 and on_gpu.peak_memory_mb == 1024.25
    on_cpu = RunResult("alibi", 0, str(root / "out" / "alibi" / "seed0"), "done")
    measure_run(on_cpu, root / "out" / "alibi" / "seed0", peak_rss_mb=3000.0)
    assert on_cpu.peak_memory_mb == 3000.0


class InProcessLauncher(CountingLauncher):
    """Runs each command in this process (what `launch` runs in a new one), recording it."""

    def __call__(self, args: list[str], log_file: Path) -> Launched:
        self.commands.append(args)
        try:
            main(args)
        except SystemExit as ended:
            return Launched(int(ended.code or 0), 0.0, "error")
        return Launched(0, 0.0, "")


def test_evaluate_scores_each_final_checkpoint_once(
    compared: tuple[Path, list[RunResult], CountingLauncher], tmp_path: Path
) -> None:
    """`evaluate:` added to a comparison whose run is done: a restart scores the run's last.ckpt with `tetraformer
    evaluate` and no fit; a failed evaluation keeps the run done with the error, the next restart scores it; once
    scored, a restart starts nothing; the report gets a column per task metric."""
    root, _, _ = compared
    tasks = write_tasks(tmp_path / "tasks")
    spec_file = tmp_path / "scored.yaml"
    section = {"tasks": [CHOICE, TEXT_TASK], "include_path": str(tasks), "batch_size": 4}
    fields = {"base": str(root / "base.yaml"), "variants": [ALIBI], "budget": {"max_steps": 4}, "evaluate": section}
    spec_file.write_text(yaml.safe_dump(fields))
    spec = load_spec(spec_file)
    run_dir = shutil.copytree(root / "out" / "alibi" / "seed0", tmp_path / "out" / "alibi" / "seed0")
    (run_dir / "command.json").write_text(json.dumps(fit_args(spec, spec.variants[0], 0, run_dir)))

    failing = FailingLauncher()
    (first,) = run_comparison(spec, tmp_path / "out", failing)
    assert first.done and first.error == "evaluate: error: no data here" and first.evaluation == {}
    assert [args[:3] for args in failing.commands] == [["evaluate", "--ckpt", str(run_dir / "checkpoints/last.ckpt")]]
    scoring = InProcessLauncher()
    (second,) = run_comparison(spec, tmp_path / "out", scoring)
    assert [args[0] for args in scoring.commands] == ["evaluate"] and second.error is None
    assert {f"{CHOICE}/acc", f"{CHOICE}/acc_norm", f"{TEXT_TASK}/bits_per_byte"} <= set(second.evaluation)
    assert read_result(run_dir) == second
    idle = CountingLauncher()
    assert run_comparison(spec, tmp_path / "out", idle) == [second] and idle.commands == []
    write_report(tmp_path / "report", [second], "scored", wandb_mode="disabled")
    assert f"{CHOICE}/acc" in (tmp_path / "report" / "results.md").read_text()
