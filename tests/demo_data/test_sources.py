"""tetraformer.demo_data.sources: pip and apt look-ups whose failures are one line, without network or root."""

from __future__ import annotations

import sys

import pytest

from tetraformer.demo_data import sources as src


def test_run_command_reports_the_last_line_of_output() -> None:
    """A failing command becomes one SourceUnavailable line carrying its last stderr line."""
    cmd = [sys.executable, "-c", "import sys; print('noise'); sys.exit('ERROR: no such package')"]
    with pytest.raises(src.SourceUnavailable, match="^pip failed: ERROR: no such package$"):
        src.run_command(cmd, "pip failed")


def test_pip_package_dir_finds_an_installed_package_without_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that is already importable is located without running pip."""
    monkeypatch.setattr(src, "run_command", lambda *a, **k: pytest.fail("pip must not run"))
    assert src.pip_package_dir("anything", "json").name == "json"


def test_apt_install_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root the error says which command to run instead of failing inside apt-get."""
    monkeypatch.setattr(src.os, "geteuid", lambda: 1000, raising=False)
    with pytest.raises(src.SourceUnavailable, match="sudo apt-get install -y trans-de-en"):
        src.apt_install("trans-de-en")


def test_missing_packages_are_named_in_one_line_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root, every missing package of a dataset is named in one sudo line, not one per rerun; as root each
    missing one (and only those) is installed."""
    monkeypatch.setattr(src, "apt_installed", lambda package: package == "git-man")
    installed: list[str] = []
    monkeypatch.setattr(src, "apt_install", lambda *packages: installed.extend(packages))
    monkeypatch.setattr(src.os, "geteuid", lambda: 1000, raising=False)
    with pytest.raises(
        src.SourceUnavailable, match=r"not installed: coreutils, tar; run: sudo apt-get install -y coreutils tar$"
    ):
        src.require_apt_packages(["coreutils", "git-man", "tar"])
    assert installed == []
    monkeypatch.setattr(src.os, "geteuid", lambda: 0, raising=False)
    src.require_apt_packages(["coreutils", "git-man", "tar"])
    assert installed == ["coreutils", "tar"]
