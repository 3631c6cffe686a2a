"""This process's random generators (Python, NumPy, torch CPU and CUDA) as plain data and back: what a checkpoint
keeps for an exact resume, and what a borrowed run (lm-eval seeds them all) is made to leave as it found it."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    """This process's Python, NumPy, torch CPU and (when initialised) CUDA RNG states, as plain data and tensors."""
    _, key, pos, has_gauss, gauss = np.random.get_state()
    numpy = {
        "key": torch.from_numpy(key.astype(np.int64)),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "gauss": float(gauss),
    }
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    return {"python": random.getstate(), "numpy": numpy, "torch": torch.get_rng_state(), "cuda": cuda}


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states `rng_state` took (CUDA's when this process sees as many devices)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy = state["numpy"]
    key = numpy["key"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", key, numpy["pos"], numpy["has_gauss"], numpy["gauss"]))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextmanager
def rng_kept() -> Iterator[None]:
    """Within the block, anything may seed or draw from the global generators; on exit they are as they were."""
    state = rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
