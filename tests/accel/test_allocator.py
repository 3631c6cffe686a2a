"""CPU training's malloc setting: freed buffers are reused without page faults, and it can be turned off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tetraformer.accel import allocator

ROOT = Path(__file__).resolve().parents[2]
FAULTS = """
import resource, sys, torch
from tetraformer.accel.allocator import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):  # steps allocating and freeing 4 MiB activations: the first takes the pages
    xs = [torch.ones(1 << 20) for _ in range(8)]
    del xs
start = faults()
for _ in range(10):
    xs = [torch.ones(1 << 20) for _ in range(8)]
    del xs
print(applied, faults() - start)
"""


def faults_in_steady_steps(setting: str) -> tuple[bool, int]:
    """In a fresh process (mallopt is process-wide): whether the setting applied, and the page faults of ten
    steps that each allocate and free eight 4 MiB tensors, after three warm-up steps."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)])}
    # glibc's mmap threshold starts at 128 KiB and then follows the largest chunk freed, so whether its default
    # faults depends on what the process freed first; pinned at the start value (as MALLOC_MMAP_THRESHOLD_ pins it),
    # the default takes its faults every step, and the setting must lift the pin itself
    env["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)
    out = subprocess.run([sys.executable, "-c", FAULTS, setting], env=env, capture_output=True, text=True, check=True)
    applied, faults = out.stdout.split()
    return applied == "True", int(faults)


@pytest.mark.skipif(allocator.glibc_mallopt() is None, reason="needs glibc")
def test_freed_buffers_are_reused_without_page_faults() -> None:
    """With the setting, steady steps take (nearly) no page faults; glibc's default takes one per 4 KiB page of
    each buffer it returns to the kernel and takes back (8 x 4 MiB a step: thousands)."""
    applied, kept = faults_in_steady_steps("keep")
    assert applied
    assert kept < 100
    _, default = faults_in_steady_steps("default")
    assert default > 10 * max(kept, 100)


def test_the_mode_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """TETRAFORMER_MALLOC=default keeps glibc's behaviour (nothing applied); an unknown value is refused by name."""
    monkeypatch.setenv("TETRAFORMER_MALLOC", "default")
    allocator.keep_freed_memory.cache_clear()
    try:
        assert allocator.keep_freed_memory() is False
    finally:
        allocator.keep_freed_memory.cache_clear()
    monkeypatch.setenv("TETRAFORMER_MALLOC", "jemalloc")
    with pytest.raises(ValueError, match="TETRAFORMER_MALLOC must be one of keep, default"):
        allocator.mode()
