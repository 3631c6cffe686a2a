"""A fit that fails before its first step leaves no logs/version_N and no W&B run: the retry logs to version_0."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tasks.text_classification.conftest import labelled_rows, write_jsonl

# each way to fail before the first step: the flags or data of the failing try (its retry drops them)
FAILURES = {
    "data error in setup": ((), "val.jsonl:2: line is not valid JSON"),
    "config error at trainer start": (("--trainer.val_check_interval", "500"), "--trainer.val_check_interval 500"),
}


def test_failed_starts_leave_no_version(
    run_cli: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each failing try (one after the other, into the same run directory) exits 2 with the error and leaves no
    logs/version_N nor offline W&B run; the corrected retry writes version_0."""
    train = write_jsonl(tmp_path / "train.jsonl", labelled_rows(30, 0))
    val = tmp_path / "val.jsonl"
    common = ("--run.wandb", "offline", "--trainer.max_steps", "2")
    run = tmp_path / "run"
    for flags, message in FAILURES.values():
        write_jsonl(val, labelled_rows(6, 1))
        if not flags:  # the data error: a missing comma on line 2 of the validation file
            val.write_text('{"text": "a goal", "label": "sport"}\n{"text": "soup" "label": "food"}\n', encoding="utf-8")
        with pytest.raises(SystemExit) as failed:
            run_cli("fit", *common, *flags, train_path=str(train), val_path=str(val))
        assert failed.value.code == 2 and message in capsys.readouterr().err.strip().splitlines()[-1]
        assert not (run / "logs" / "version_0").exists() and not list(run.glob("wandb/offline-run-*"))
        assert not [link for link in run.glob("wandb/*") if link.is_symlink()]  # no latest-run pointing nowhere

    write_jsonl(val, labelled_rows(6, 1))
    run_cli("fit", *common, train_path=str(train), val_path=str(val))
    assert [p.name for p in (run / "logs").iterdir()] == ["version_0"]
    assert (run / "logs" / "version_0" / "metrics.csv").is_file()
    (wandb_run,) = run.glob("wandb/offline-run-*")
    assert (run / "wandb" / "latest-run").resolve() == wandb_run.resolve()
