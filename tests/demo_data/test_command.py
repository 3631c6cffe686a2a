"""`tetraformer demo-data`: names checked against the registry, one ERROR line per failed dataset, exit status 1
when any failed, and a command module that loads nothing heavy (its --help and --list stay quick)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.lazy_imports import HEAVY, loaded_after
from tests.processes import tetraformer
from tetraformer.cli.demo_data import DatasetsFailed, demo_data_main
from tetraformer.errors import ConfigError


def test_failed_dataset_is_one_error_line_and_exit_status_1(
    tmp_path: Path, fake_registry: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A missing source is one ERROR line, other datasets still build, and the command exits 1."""
    with caplog.at_level(logging.INFO, logger="tetraformer"), pytest.raises(DatasetsFailed, match="broken") as err:
        demo_data_main(["broken", "ok", "--out", str(tmp_path)])
    assert err.value.exit_code == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["broken: pip could not install nothing-here"]
    assert (tmp_path / "fake" / "train.txt").exists()


def test_list_shows_the_names(fake_registry: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """--list prints one dataset per line and builds nothing."""
    demo_data_main(["--list"])
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["ok", "broken", "missing"]
    assert fake_registry == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope", "ok"], "unknown dataset nope; choose from: all, ok, broken, missing"),
        ([], "name at least one dataset, or 'all' (--list shows them)"),
        (["ok", "--limit", "-1"], "--limit must be 0 or more, got -1"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_fix(fake_registry: list[str], argv: list[str], message: str) -> None:
    """An unknown name lists the known ones; no name or a negative --limit says what to give."""
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        demo_data_main(argv)
    assert fake_registry == []


def test_the_command_modules_load_nothing_heavy() -> None:
    """`demo-data` and `summary` import no torch, Lightning or data stack until a builder needs one."""
    assert loaded_after("import tetraformer.cli.demo_data, tetraformer.cli.summary", HEAVY) == []


@pytest.mark.slow  # a fresh process through the installed script
def test_installed_script_lists_the_datasets(tmp_path: Path) -> None:
    """`tetraformer demo-data --list` in a fresh process names every dataset the shipped configs read."""
    names = [line.split()[0] for line in tetraformer("demo-data", "--list", cache_dir=tmp_path).stdout.splitlines()]
    assert {"gutenberg", "reuters", "fashion_mnist", "digits", "ner_ja", "en_vectors"} <= set(names)
