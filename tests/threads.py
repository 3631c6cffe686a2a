"""One torch thread for packages of tiny-model tests: fastest there, and immune to other busy processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="package", autouse=True)
def single_thread() -> Iterator[None]:
    """Run the package on one torch thread, restoring the previous setting afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
