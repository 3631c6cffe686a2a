"""What a run leaves in RUN_DIR: checkpoints overwritten in place, config.yaml, resumes, evaluation runs."""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

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


def test_rerun_overwrites_checkpoints_and_best_exists_without_validation(
    run_cli: Callable[..., Path], text_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Runs into one directory leave only best.ckpt and last.ckpt; each validates on the step it stops on (before the
    first interval), so none says that no validation ran."""
    caplog.set_level(logging.INFO)
    data = {"train_path": str(text_file), "documents": "line"}
    run = run_cli("fit", "--trainer.max_steps", "3", **data)  # validates at step 3, before the interval's 5
    run_cli("fit", "--trainer.max_steps", "6", **data)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    run_cli("fit", "--trainer.max_steps", "4", **data)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    best = torch.load(run / "checkpoints" / "best.ckpt", weights_only=True)
    assert best["global_step"] == 4 and "no validation ran" not in caplog.text


def test_best_comes_from_validation_when_one_ran(run_cli: Callable[..., Path], text_file: Path) -> None:
    """With validations, best.ckpt is the checkpoint of the best val/loss, chosen among validated steps only."""
    run = run_cli("fit", "--trainer.max_steps", "12", train_path=str(text_file), documents="line")
    best = torch.load(run / "checkpoints" / "best.ckpt", weights_only=True)
    val_steps = {step + 1 for _, step in logged_rows(run, "val/loss")[0]}  # rows sit at global_step - 1
    assert val_steps == {5, 10, 12}  # every 5 steps, and the step the budget ends on
    assert best["global_step"] in val_steps


@pytest.mark.parametrize(("stop", "next_epoch"), [(7, 0), (10, 1)])  # mid-epoch, at the end of epoch 1
def test_resume_keeps_epochs_steps_and_throughput(
    stop: int, next_epoch: int, run_cli: Callable[..., Path], text_file: Path
) -> None:
    """After `fit --ckpt_path last` epochs do not jump, no step is skipped and tokens_per_s is still logged.

    Rows come every third step, and may come on the step a fit stops on (it validates there first).
    """
    data = {"train_path": str(text_file), "documents": "line", "val_fraction": 0.2}  # 5 batches an epoch
    every = ("--trainer.log_every_n_steps", "3")
    run = run_cli("fit", "--trainer.max_steps", str(stop), *every, **data)
    run_cli("fit", "--trainer.max_steps", "16", "--ckpt_path", "last", *every, **data)
    first, resumed = logged_rows(run, "train/loss")
    (_, throughput) = logged_rows(run, "train/tokens_per_s")
    steps = [step for _, step in first + resumed]  # rows sit at global_step - 1
    assert [step for step in steps if (step + 1) % 3 == 0] == [2, 5, 8, 11, 14]  # every third step, none skipped
    assert set(steps) - {2, 5, 8, 11, 14} <= {stop - 1, 15}  # besides them, at most each fit's final step
    assert resumed[0][0] == first[-1][0] + next_epoch  # the interrupted epoch goes on, or the next starts
    assert throughput == resumed


def test_resolved_config_is_in_run_dir(run_cli: Callable[..., Path], text_file: Path) -> None:
    """RUN_DIR/config.yaml holds the resolved config, command-line overrides included."""
    run = run_cli("fit", "--trainer.max_steps", "3", "--model.arch.d_ff", "96", train_path=str(text_file))
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["trainer"]["max_steps"] == 3
    assert config["model"]["init_args"]["arch"]["d_ff"] == 96
    assert config["data"]["init_args"]["train_path"] == str(text_file)


def test_evaluation_runs_get_their_own_dir_and_wandb_run(
    run_cli: Callable[..., Path],
    text_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """test/predict from a checkpoint write to RUN_DIR/eval/STAGE-N with a new W&B run, and say where."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    caplog.set_level(logging.INFO)
    run = run_cli("fit", "--trainer.max_steps", "5", "--run.wandb", "auto", train_path=str(text_file))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    ckpt = str(run / "checkpoints" / "last.ckpt")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("First\nhear me\n")
    for _ in range(2):
        main(["predict", "--ckpt_path", ckpt, "--data.predict_path", str(prompts)])
    main(["test", "--ckpt_path", ckpt, "--data.test_path", str(text_file), "--data.documents", "line"])
    assert list(work.iterdir()) == []  # nothing in the current directory
    eval_dir = run / "eval"
    assert sorted(p.name for p in eval_dir.iterdir()) == ["predict-1", "predict-2", "test-1"]
    predictions = eval_dir / "predict-2" / "predictions.jsonl"
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert [r["prompt"] for r in records] == ["First", "hear me"]
    metrics = next((eval_dir / "test-1").glob("logs/version_*/metrics.csv"))
    assert "test/loss" in metrics.read_text()
    assert f"wrote {predictions}" in caplog.text and f"wrote {metrics}" in caplog.text
    (train_run,) = run.glob("wandb/offline-run-*")
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
    stopped = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    # 2 more steps, under a time budget that no busy machine runs out of
    more = ("--trainer.max_steps", str(stopped + 2), "--trainer.max_time", "00:01:00:00")
    run_cli("fit", *more, "--ckpt_path", "last", **data)
    *_, resumed = logged_rows(run, "train/tokens_per_s")
    assert resumed  # the resumed run trained and logged its throughput
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == stopped + 2
