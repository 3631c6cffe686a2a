"""How a `tetraformer` process loads its libraries: with Python's cyclic garbage collector paused, then frozen.

Importing Lightning brings torch, torch._dynamo, torchmetrics and through it transformers and scipy: millions of
objects that live as long as the process. Each collection pass while they are made walks all of them again, and the
interpreter walks them once more on its way out: about 2 s of CPU on 2 cores (of 7 for a tiny fit), for nothing.
`gc.freeze()` moves them to the collector's permanent generation, so later passes skip them. The cost is the
import's own cyclic garbage, kept for the process's life (about 9 MB). Nothing about a run's numbers depends on it.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

HEAVY = "lightning"  # the library whose import makes the bulk of a process's long-lived objects


@contextmanager
def long_lived_imports() -> Iterator[None]:
    """Run the block with the collector off, then freeze what is alive and turn it back on; only in a process that
    has not loaded Lightning yet (a second in-process command, or a test process, keeps its collector as it is)."""
    if HEAVY in sys.modules or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
