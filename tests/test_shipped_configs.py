"""Every shipped training config parses with the CLI (nothing trained, no data read)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tetraformer.cli import main

ROOT = Path(__file__).parents[1] / "configs"
CONFIGS = sorted(path for path in ROOT.glob("*/*.yaml") if path.parent.name != "compare")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_shipped_config_parses(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fit -c CONFIG --print_config` accepts every option of the shipped config and keeps its data paths."""
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "-c", str(config), "--print_config"])
    assert exit_info.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)
    shipped = yaml.safe_load(config.read_text())["data"]["init_args"]
    for key in {"train_path", "val_path", "test_path"} & set(shipped):
        assert printed["data"]["init_args"][key] == shipped[key]
