"""`torch.compile` for training: each core Block compiled in place, so weight names stay the eager ones."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch import nn

from tetraformer.core.layers import Block

log = logging.getLogger(__name__)


def compile_blocks(net: nn.Module, **options: Any) -> int:
    """Compile every Block of `net` in place (nn.Module.compile, with torch.compile's `options`); returns how many.

    Compiling the blocks rather than the whole network covers every entry point a task calls (forward,
    masked LM's pretraining_logits, ...), keeps FSDP's Block units intact, and adds no `_orig_mod.` prefix to the
    state_dict. Blocks share their code, so the first one's graph serves the others (one compilation).
    """
    blocks = [m for m in net.modules() if isinstance(m, Block)]
    for block in blocks:
        block.compile(**options)
    log.info("compiled %d blocks of %s with torch.compile", len(blocks), type(net).__name__)
    return len(blocks)


def eager_decoding() -> AbstractContextManager:
    """Run compiled blocks eagerly inside: cached decoding feeds a new shape every step, which would recompile."""
    set_stance = getattr(torch.compiler, "set_stance", None)  # torch >= 2.6
    return set_stance("force_eager") if set_stance is not None else nullcontext()
