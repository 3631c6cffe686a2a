"""CPU training keeps the memory it frees: glibc's malloc told not to hand a step's buffers back to the kernel.

A training step on a CPU allocates and frees the same activations every step. glibc serves buffers over its mmap
threshold (128 KiB, raised as they are freed) by `mmap` and trims free memory off the top of its heap, so the
next step takes them again from the kernel: a page fault and a zeroed page per 4 KiB, about 2.7 us each (AMD EPYC,
AVX2). A ViT step of the side-by-side shape took 1,600-4,000 faults (4-11 ms of its ~370), and 62,000 when the
threshold stays at 128 KiB. `keep_freed_memory` raises the threshold to glibc's limit (32 MiB) and trims only past
2 GiB of free heap, so freed buffers stay in the process and the next step reuses them: no faults after the first
step. The resident set stays near the run's peak instead of shrinking between steps, a peak a training process
reaches every step anyway.

This is the in-process form of what PyTorch's CPU tuning guides do with `LD_PRELOAD` of jemalloc or tcmalloc,
which a running Python cannot load. Off glibc (macOS, musl) it does nothing. `TETRAFORMER_MALLOC=default` keeps
glibc's own behaviour. The numbers a run computes are the same either way: only where buffers live changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # the largest glibc accepts on 64-bit (HEAP_MAX_SIZE / 2); larger buffers stay mmapped
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes a C int: the heap's free top is trimmed only past 2 GiB
MODES = ("keep", "default")  # TETRAFORMER_MALLOC


def mode() -> str:
    """TETRAFORMER_MALLOC: keep (the default) or default (glibc's own thresholds)."""
    value = os.environ.get("TETRAFORMER_MALLOC", "keep")
    if value not in MODES:
        raise ValueError(f"TETRAFORMER_MALLOC must be one of {', '.join(MODES)}, got {value!r}")
    return value


@functools.cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap threshold and stop heap trimming for this process, once; whether it was applied."""
    if mode() == "default":
        return False
    mallopt = glibc_mallopt()
    if mallopt is None:
        return False
    applied = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    log.debug("glibc malloc keeps freed memory (mmap threshold 32 MiB, trimming past 2 GiB): %s", applied)
    return applied


def glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's `mallopt(int, int)`, or None where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
    except (OSError, AttributeError):
        return None
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt
