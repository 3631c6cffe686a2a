"""What the CLI leaves in sys.argv[0]: the file Lightning's DDP launcher runs again for each further rank."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.tasks.language_modeling.conftest import tiny_config
from tetraformer.cli import main


def print_config(tmp_path: Path) -> None:
    """`tetraformer fit -c CONFIG --print_config`: parses everything, trains nothing."""
    config = tmp_path / "fit.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path / "run", train_path="corpus.txt")))
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "-c", str(config), "--print_config"])
    assert exit_info.value.code in (0, None)


def test_console_script_stays_the_launched_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run as the `tetraformer` console script from another folder, sys.argv[0] still names that script (Lightning
    starts DDP ranks 1.. as `python abspath(sys.argv[0]) ...`; a bare `tetraformer` was a missing file in the cwd)."""
    script = tmp_path / "venv" / "bin" / "tetraformer"
    script.parent.mkdir(parents=True)
    script.write_text("#!/usr/bin/env python\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "fit"])
    print_config(tmp_path)
    assert Path(os.path.abspath(sys.argv[0])) == script and script.is_file()
    capsys.readouterr()


@pytest.mark.parametrize("argv0", ["venv/bin/tetraformer", "site-packages/tetraformer/cli/__main__.py"])
def test_usage_names_tetraformer(
    argv0: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fit --help` says `usage: tetraformer [options] fit`, launched as the console script or `python -m`."""
    launcher = tmp_path / argv0
    launcher.parent.mkdir(parents=True)
    launcher.write_text("")
    monkeypatch.setattr(sys, "argv", [str(launcher)])
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    assert capsys.readouterr().out.startswith("usage: tetraformer [options] fit")
