"""A pytest plugin (`-p tests.collector_plugin` in pyproject's addopts): a test process imports its libraries with
Python's cyclic garbage collector paused, then freezes them, as the `tetraformer` script does
(tetraformer/cli/startup.py).

The conftest and the test modules import Lightning, transformers, peft and the rest once per worker; every later
collection pass of a test would walk those millions of long-lived objects again. Frozen after the conftests load and
again after collection, they are skipped; what the tests make is collected as before.
"""

from __future__ import annotations

import gc

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests() -> None:
    """Pause the collector before the conftests import the libraries."""
    gc.disable()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart() -> None:
    """Freeze what the conftests imported and turn the collector back on (every pytest process, workers or not)."""
    gc.freeze()
    gc.enable()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish() -> None:
    """Freeze what the test modules imported, too."""
    gc.freeze()
