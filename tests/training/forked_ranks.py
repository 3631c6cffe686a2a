"""Two DDP ranks forked from the test process (Lightning's `ddp_fork`): the same DDPStrategy and collectives as
`ddp`, without a fresh interpreter's imports (~6 s of CPU) per rank; helpers that keep such a test to itself."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.processes import free_port


def own_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give the forked ranks a free MASTER_PORT, unset after the test: Lightning's launcher writes the port it uses
    into this process's environment, where the later tests' subprocess runs would inherit one fixed port."""
    monkeypatch.setenv("MASTER_PORT", str(free_port()))


@contextmanager
def logged_to(path: Path) -> Iterator[Path]:
    """Within the block, every INFO record appended to `path`, the forked ranks' too (they inherit the handler)."""
    handler = logging.FileHandler(path)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()
