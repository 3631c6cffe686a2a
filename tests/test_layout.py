"""The source root `platform/` must never shadow the stdlib module `platform` (torch imports it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_platform_is_not_a_package() -> None:
    """platform/ is a source root: it has no __init__.py."""
    assert (REPO / "platform" / "tetraformer").is_dir()
    assert not (REPO / "platform" / "__init__.py").exists()


def test_stdlib_platform_wins_from_repo_root() -> None:
    """From the repo root (on sys.path first), `platform` is still the stdlib module."""
    code = "import tetraformer, platform; print(platform.system())"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "platform.system() printed nothing"
