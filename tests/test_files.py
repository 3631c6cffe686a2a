"""Model sources inside installed packages: `pkg:PACKAGE/sub/path` resolves to that folder, or one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

import tetraformer
from tetraformer.errors import ConfigError
from tetraformer.files import resolve_source


def test_a_package_folder_resolves_to_its_path() -> None:
    """pkg:tetraformer/accel names the accel folder of the installed tetraformer package."""
    assert Path(resolve_source("pkg:tetraformer/accel")) == Path(tetraformer.__file__).parent / "accel"


@pytest.mark.parametrize("source", [None, "runs/x/checkpoints/last.ckpt", "/models/bert", "pkgs/bert"])
def test_other_sources_pass_through(source: str | None) -> None:
    """Paths, and None, are returned as given."""
    assert resolve_source(source) == source


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("pkg:no_such_weights_package/model", "pip install no-such-weights-package"),
        ("pkg:tetraformer/no_such_folder", "has no no_such_folder"),
        ("pkg:not-an-identifier/model", "is not installed"),
    ],
)
def test_a_missing_package_or_folder_is_one_config_error(source: str, says: str) -> None:
    """An uninstalled package says how to install it; a missing folder names the path looked at."""
    with pytest.raises(ConfigError, match=says):
        resolve_source(source)
