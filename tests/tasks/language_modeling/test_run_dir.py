"""What a run leaves in RUN_DIR, read off the reference run: checkpoints, metrics.csv, config.yaml, W&B, and what a
resume, a rerun and an evaluation run from its checkpoint add."""

from __future__ import annotations

import csv
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

from tests.cli_runner import config_runner
from tests.tasks.language_modeling.conftest import REFERENCE_ARGS, REFERENCE_DATA, reference_data, tiny_config
from tests.training.wandb_records import history_rows
from tetraformer.cli import main


def logged_rows(run: Path, key: str) -> list[list[tuple[int, int]]]:
    """(epoch, step) of the rows logging `key`, per logs/version_N/metrics.csv in version order."""
    versions = sorted(run.glob("logs/version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    out = []
    for metrics in versions:
        with metrics.open() as f:
            out.append([(int(r["epoch"]), int(r["step"])) for r in csv.DictReader(f) if r.get(key)])
    return out


def metrics_rows(run: Path) -> list[dict[str, str]]:
    """The rows of the run's first metrics.csv."""
    with (run / "logs" / "version_0" / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def checkpoint(run: Path, name: str = "last") -> dict:
    """The run's checkpoint `name` (last or best), tensors included."""
    return torch.load(run / "checkpoints" / f"{name}.ckpt", weights_only=True)


def test_checkpoints_are_best_and_last_and_best_is_a_validated_step(trained_run: Path) -> None:
    """Validation runs every 5 steps and on the step the budget ends on (12, between intervals); the run dir holds
    only best.ckpt and last.ckpt, and best.ckpt is the checkpoint of a validated step."""
    val_steps = [step + 1 for _, step in logged_rows(trained_run, "val/loss")[0]]  # rows sit at global_step - 1
    assert val_steps == [5, 10, 12]
    assert sorted(p.name for p in (trained_run / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    assert checkpoint(trained_run)["global_step"] == 12 and checkpoint(trained_run, "best")["global_step"] in val_steps


def test_validation_rows_carry_elapsed_seconds(trained_run: Path) -> None:
    """Each validation row of metrics.csv has time/elapsed_s: wall seconds since fit start, growing row by row."""
    elapsed = [float(r["time/elapsed_s"]) for r in metrics_rows(trained_run) if r.get("val/loss")]
    assert len(elapsed) == 3 and 0.0 < elapsed[0] < elapsed[1] < elapsed[2]


def test_a_configured_peak_logs_mfu(trained_run: Path) -> None:
    """`--run.peak_tflops 1.0` adds train/mfu beside train/tokens_per_s: the model's FLOPs/s over the peak (the
    measured peak, the default, is tests/tasks/test_throughput.py's)."""
    rows = [r for r in metrics_rows(trained_run) if r.get("train/mfu")]
    assert rows
    for row in rows:
        assert 0.0 < float(row["train/mfu"]) < 1.0
        assert float(row["train/tokens_per_s"]) > 0


def test_resolved_config_is_in_run_dir(trained_run: Path) -> None:
    """RUN_DIR/config.yaml holds the resolved config, command-line overrides included."""
    config = yaml.safe_load((trained_run / "config.yaml").read_text())
    assert config["trainer"]["max_steps"] == 12
    assert config["model"]["init_args"]["arch"]["d_ff"] == 96
    assert config["data"]["init_args"]["train_path"] == reference_data(trained_run)["train_path"]


def test_wandb_offline_run_holds_metrics(trained_run: Path) -> None:
    """With WANDB_MODE=offline the run leaves an offline W&B run with the logged train and val metrics."""
    (run_file,) = trained_run.glob("wandb/offline-run-*/run-*.wandb")
    rows = history_rows(run_file)
    keys = sorted({k for r in rows for k in r})
    assert "train/loss" in keys and "val/loss" in keys, keys
    assert any("val/samples/_type" in r for r in rows)  # the generated-samples table


def test_a_rerun_overwrites_the_checkpoints(
    run_copy: Path, trained_run: Path, run_cli: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A new fit into a run dir that holds a run's checkpoints leaves only best.ckpt and last.ckpt, both its own; it
    validates on the step it stops on (4, before the first interval), so it does not say that no validation ran."""
    caplog.set_level(logging.INFO)
    run_cli("fit", "--trainer.max_steps", "4", **reference_data(trained_run))
    assert sorted(p.name for p in (run_copy / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    assert checkpoint(run_copy, "best")["global_step"] == 4 and "no validation ran" not in caplog.text


@pytest.fixture(scope="module")
def resumed(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the reference run resumed by `fit --ckpt_path last` (its options, W&B offline) from 12 to 16 steps."""
    root = tmp_path_factory.mktemp("lm_resumed")
    shutil.copytree(trained_run, root / "run")
    more = ("--trainer.max_steps", "16", "--ckpt_path", "last")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        return config_runner(root, patch, tiny_config)("fit", *REFERENCE_ARGS, *more, **reference_data(trained_run))


def rows_across_a_resume(run: Path, stop: int, end: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(epoch, step) train rows of a run stopped at `stop` and resumed to `end`, logging every third step: asserts
    that no step is skipped and tokens_per_s is still logged after the resume; returns the two fits' rows."""
    first, resumed = logged_rows(run, "train/loss")
    (_, throughput) = logged_rows(run, "train/tokens_per_s")
    steps = [step for _, step in first + resumed]  # rows sit at global_step - 1
    assert {step for step in range(end) if (step + 1) % 3 == 0} <= set(steps)  # every third step, none skipped
    assert throughput == resumed
    return first, resumed


def test_a_resume_mid_epoch_keeps_epochs_steps_and_throughput(resumed: Path) -> None:
    """Stopped at step 12 (batch 2 of epoch 2: 5 batches an epoch) and resumed to 16: the epoch goes on, no step is
    skipped, tokens_per_s is still logged, and the checkpoint counts 16 steps."""
    first, after = rows_across_a_resume(resumed, 12, 16)
    assert after[0][0] == first[-1][0] == 2
    assert checkpoint(resumed)["global_step"] == 16


def test_a_resumed_run_logs_at_the_steps_a_straight_run_does(resumed: Path) -> None:
    """After the resume, rows sit at global_step - 1 as before: train rows every third step and none twice,
    validations at 15 and at the 16 it stops on, W&B rows from the checkpoint's step on."""
    (first, after) = logged_rows(resumed, "train/loss")
    steps = [step for _, step in first + after]
    assert [step for step in steps if (step + 1) % 3 == 0] == [2, 5, 8, 11, 14]
    assert set(steps) - {2, 5, 8, 11, 14} <= {11, 15}  # besides them, at most each fit's final step
    assert [step + 1 for _, step in logged_rows(resumed, "val/loss")[1]] == [15, 16]
    again = sorted(resumed.glob("wandb/offline-run-*"))[1]
    assert min(r["trainer/global_step"] for r in history_rows(next(again.glob("run-*.wandb")))) >= 12


def test_a_resume_at_an_epoch_end_starts_the_next(run_cli: Callable[..., Path], text_file: Path) -> None:
    """Stopped at step 5, the end of epoch 0, and resumed to 8: the next epoch starts, no step is skipped."""
    data = {"train_path": str(text_file), **REFERENCE_DATA}
    every = ("--trainer.log_every_n_steps", "3")
    run = run_cli("fit", "--trainer.max_steps", "5", *every, **data)
    run_cli("fit", "--trainer.max_steps", "8", "--ckpt_path", "last", *every, **data)
    first, after = rows_across_a_resume(run, 5, 8)
    assert (first[-1][0], after[0][0]) == (0, 1)


def test_a_resume_continues_the_wandb_run(resumed: Path) -> None:
    """`fit --ckpt_path last` logs to the same W&B run, from where it stopped."""
    first, again = sorted(resumed.glob("wandb/offline-run-*"))
    assert first.name.rsplit("-", 1)[1] == again.name.rsplit("-", 1)[1]  # the same W&B run continues
    assert max(r["trainer/global_step"] for r in history_rows(next(again.glob("run-*.wandb")))) >= 14


def test_a_resume_reuses_the_run_tokenizer(resumed: Path, trained_run: Path) -> None:
    """The same settings and files reuse RUN_DIR/tokenizer as it is: the resume does not write it again."""
    written = [(run / "tokenizer" / "tokenizer.json").stat().st_mtime_ns for run in (trained_run, resumed)]
    assert written[0] == written[1]  # the copy keeps the reference's mtime; a retrained tokenizer would not


def test_evaluation_runs_get_their_own_dir_and_wandb_run(
    run_copy: Path, text_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """test/predict need only --ckpt_path and a data path; they write to RUN_DIR/eval/STAGE-N with a new W&B run,
    and say where."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    caplog.set_level(logging.INFO)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    ckpt = str(run_copy / "checkpoints" / "last.ckpt")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("First\nhear me\n")
    for _ in range(2):
        main(["predict", "--ckpt_path", ckpt, "--data.predict_path", str(prompts)])
    main(["test", "--ckpt_path", ckpt, "--data.test_path", str(text_file), "--data.documents", "line"])
    assert list(work.iterdir()) == []  # nothing in the current directory
    eval_dir = run_copy / "eval"
    assert sorted(p.name for p in eval_dir.iterdir()) == ["predict-1", "predict-2", "test-1"]
    predictions = eval_dir / "predict-2" / "predictions.jsonl"
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert [r["prompt"] for r in records] == ["First", "hear me"] and all("generated" in r for r in records)
    metrics = next((eval_dir / "test-1").glob("logs/version_*/metrics.csv"))
    assert "test/loss" in metrics.read_text()
    assert f"wrote {predictions}" in caplog.text and f"wrote {metrics}" in caplog.text
    (train_run,) = run_copy.glob("wandb/offline-run-*")
    (test_run,) = (eval_dir / "test-1").glob("wandb/offline-run-*")
    assert train_run.name.rsplit("-", 1)[1] != test_run.name.rsplit("-", 1)[1]  # a new W&B run
    assert any("test/loss" in row for row in history_rows(next(test_run.glob("run-*.wandb"))))
    assert (eval_dir / "test-1" / "config.yaml").is_file()


def test_resume_with_max_time_spent_says_so(
    run_cli: Callable[..., Path], text_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """max_time counts over resumes: a resume with none left is one error line, a larger budget trains on."""
    data = {"train_path": str(text_file), "documents": "line"}
    budget = ("--trainer.max_steps", "100000", "--trainer.val_check_interval", "50")
    run = run_cli("fit", *budget, "--trainer.max_time", "00:00:00:01", **data)  # stopped by the time
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", *budget, "--trainer.max_time", "00:00:00:01", "--ckpt_path", "last", **data)
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: this run already trained for") and "raise --trainer.max_time" in line
    stopped = checkpoint(run)["global_step"]
    # 2 more steps, under a time budget that no busy machine runs out of
    more = ("--trainer.max_steps", str(stopped + 2), "--trainer.max_time", "00:01:00:00")
    run_cli("fit", *more, "--ckpt_path", "last", **data)
    *_, resumed = logged_rows(run, "train/tokens_per_s")
    assert resumed  # the resumed run trained and logged its throughput
    assert checkpoint(run)["global_step"] == stopped + 2
