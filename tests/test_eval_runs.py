"""Evaluation from a checkpoint: its own fresh directory, its own task, and one-line errors for what is missing."""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.tasks.text_classification import conftest as tc
from tests.trained_checkpoints import checkpoint_factory
from tetraformer.cli import main
from tetraformer.cli.command_line import split_configs

LM_CLASS = "tasks.language_modeling.module.LanguageModeling"
CLASSIFIER_CLASS = "tasks.text_classification.module.TextClassification"
NO_WANDB = ("--run.wandb", "disabled")
NO_TRAIN_OR_VAL = ["--data.val_path", "null", "--data.train_path", "null"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Factory: the last.ckpt of a 3-step run of one family (ROOT/run, config ROOT/fit.yaml), trained once."""
    return checkpoint_factory(tmp_path_factory)


@pytest.fixture
def test_csv(tmp_path: Path) -> Path:
    """Labelled rows of the keyword fixture, as a test (or predict) file."""
    return tc.write_csv(tmp_path / "test.csv", tc.labelled_rows(12, 2))


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under a directory: its modification time (ns) and a digest of its content."""
    return {
        str(path.relative_to(root)): (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
        for path in root.rglob("*")
        if path.is_file()
    }


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str], whole_stderr: bool = True) -> str:
    """Run the CLI, expect exit code 2 and exactly one `error:` line (the whole stderr when `whole_stderr`)."""
    capsys.readouterr()  # the fit that made a checkpoint, if this test made it
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    if whole_stderr:
        assert err.strip() == errors[0]
    return errors[0]


def test_split_configs_keeps_order_of_configs_and_flags() -> None:
    """Every form of a config argument is taken out in order; flags keep theirs."""
    args = ["-c", "a.yaml", "--model.top_k", "5", "--config=b.yaml", "--config", "c.yaml", "--data.x", "1"]
    configs, flags = split_configs(args)
    assert configs == ["-c", "a.yaml", "--config=b.yaml", "--config", "c.yaml"]
    assert flags == ["--model.top_k", "5", "--data.x", "1"]


@pytest.mark.slow  # the checkpoint factory fits each family the first time it is asked for it
@pytest.mark.parametrize(
    ("stage", "args"),
    [
        ("fit", []),
        ("validate", []),
        ("test", ["--data.test_path", "{test}"]),
        ("predict", ["--data.predict_path", "{test}"]),
    ],
)
def test_a_checkpoint_of_another_task_is_refused_in_one_line(
    stage: str,
    args: list[str],
    checkpoint: Callable[[str], Path],
    test_csv: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A classifier's config with a language model's checkpoint: exit 2, one line naming both, no run touched."""
    classifier, lm = checkpoint("classifier_encoder"), checkpoint("language_model")
    runs = [classifier.parents[1], lm.parents[1]]
    before = [snapshot(run) for run in runs]
    config = classifier.parents[2] / "fit.yaml"
    args = [arg.format(test=test_csv) for arg in args]
    error = one_error_line(capsys, [stage, "-c", str(config), "--ckpt_path", str(lm), *args])
    assert f"--ckpt_path {lm} is a language_modeling checkpoint ({LM_CLASS})" in error
    assert f"the config's model is {CLASSIFIER_CLASS}: " in error
    assert "--model.init_from" in error if stage == "fit" else "use a text_classification checkpoint" in error
    assert [snapshot(run) for run in runs] == before


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["fit", "test"])
def test_last_of_another_tasks_run_is_refused_in_one_line(
    stage: str, checkpoint: Callable[[str], Path], test_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--ckpt_path last` of a classifier's run with a language model's config: the classifier's last.ckpt is named."""
    classifier, lm = checkpoint("classifier_encoder"), checkpoint("language_model")
    run = classifier.parents[1]
    before = snapshot(run)
    config = lm.parents[2] / "fit.yaml"
    argv = [stage, "-c", str(config), "--trainer.default_root_dir", str(run), "--ckpt_path", "last"]
    error = one_error_line(capsys, argv + (["--data.test_path", str(test_csv)] if stage == "test" else []))
    assert f"is a text_classification checkpoint ({CLASSIFIER_CLASS})" in error and str(classifier) in error
    assert f"the config's model is {LM_CLASS}" in error
    assert snapshot(run) == before


@pytest.mark.slow
def test_last_or_best_of_a_run_without_them_is_one_line(
    checkpoint: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`test --ckpt_path best` where the configured run has no checkpoints: the file it looked for is named."""
    config = checkpoint("classifier_encoder").parents[2] / "fit.yaml"
    empty = tmp_path / "empty"
    argv = ["test", "-c", str(config), "--trainer.default_root_dir", str(empty), "--ckpt_path", "best"]
    error = one_error_line(capsys, argv)
    assert f"--ckpt_path best names {empty / 'checkpoints' / 'best.ckpt'}" in error
    assert not empty.exists()


@pytest.mark.slow
@pytest.mark.parametrize("family", ["classifier_encoder", "language_model"])
@pytest.mark.parametrize(
    ("stage", "args", "message"),
    [
        ("predict", [], "no predict data: set --data.predict_path to a file"),
        ("test", [], "no test data: set --data.test_path to a file"),
        (
            "validate",
            ["--data.val_path", "null", "--data.train_path", "null"],
            "no validation data: set --data.val_path",
        ),
    ],
)
def test_a_stage_without_its_data_names_its_flag(
    family: str,
    stage: str,
    args: list[str],
    message: str,
    checkpoint: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """validate/test/predict from a checkpoint with no file for the stage: one line naming the flag to set."""
    ckpt = checkpoint(family)
    error = one_error_line(capsys, [stage, "--ckpt_path", str(ckpt), *NO_WANDB, *args], whole_stderr=False)
    assert message in error and "TrainerFn" not in error


@pytest.mark.slow
def test_evaluation_with_another_runs_config_writes_a_fresh_dir_and_overwrites_nothing(
    checkpoint: Callable[[str], Path], test_csv: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`test -c CONFIG --ckpt_path X` with CONFIG's run elsewhere writes CONFIG_RUN/eval/test-N/ (N counting up);
    `last` / `best` are that run's files, read with their labels. No file of either run changes."""
    caplog.set_level(logging.INFO)
    ckpt = checkpoint("classifier_encoder")
    run = ckpt.parents[1]
    other = tmp_path / "other"
    shutil.copytree(run, other)  # a real run's files: checkpoints, config.yaml, logs, reports, tokenizer
    config = yaml.safe_load((run.parent / "fit.yaml").read_text())
    config["trainer"]["default_root_dir"] = str(other)
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(config))
    before = {run: snapshot(run), other: snapshot(other)}
    evaluate = ["-c", str(tmp_path / "other.yaml")]
    main(["test", *evaluate, "--ckpt_path", str(ckpt), "--data.test_path", str(test_csv)])
    main(["test", *evaluate, "--ckpt_path", "last", "--data.test_path", str(test_csv)])
    main(["predict", *evaluate, "--ckpt_path", "best", "--data.predict_path", str(test_csv)])
    assert snapshot(run) == before[run]
    after = snapshot(other)
    assert {path: after[path] for path in before[other]} == before[other]
    made = {Path(path).parts[:2] for path in set(after) - set(before[other])}
    existed = {Path(path).parts[:2] for path in before[other]}
    assert {parts[0] for parts in made} == {"eval"} and not made & existed  # new directories only
    assert sorted(name.split("-")[0] for _, name in made) == ["predict", "test", "test"]
    for tested in sorted(name for _, name in made if name.startswith("test")):
        out = other / "eval" / tested
        (metrics,) = out.glob("logs/version_*/metrics.csv")
        with metrics.open() as f:
            assert [row["test/acc"] for row in csv.DictReader(f) if row.get("test/acc")]
        assert (out / "reports" / "test_per_class.csv").is_file() and (out / "config.yaml").is_file()
        assert yaml.safe_load((out / "from_checkpoint.yaml").read_text())["model"]["class_path"]  # kept, not in /tmp
        assert f"wrote {metrics}" in caplog.text
    (predicted,) = [name for _, name in made if name.startswith("predict")]
    predictions = other / "eval" / predicted / "predictions.jsonl"
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(records) == 12 and {r["predicted"] for r in records} <= set(tc.WORDS)  # the checkpoint's labels
    assert f"wrote {predictions}" in caplog.text
