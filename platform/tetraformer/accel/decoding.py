"""The weight layouts a decoding step multiplies in, chosen per weight shape by timing them on this machine."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from torch import nn

from tetraformer.accel.lm_head_row import one_row_projection
from tetraformer.accel.packed import packed_linears


def decoding(model: nn.Module, rows: int) -> AbstractContextManager:
    """Within, the model multiplies `rows` rows per step (batch x beams) in its fastest weight layout on this device.

    One row: a transposed copy of the LM head's weight; more: oneDNN-packed Linear weights (fp32 CPU, gradients
    off). Made on entry, dropped on exit; the core's `generate` runs unchanged inside.
    """
    if rows > 1:
        return packed_linears(_step_modules(model), rows)
    proj = getattr(getattr(model, "lm_head", None), "proj", None)
    return one_row_projection(proj) if proj is not None else nullcontext()


def _step_modules(model: nn.Module) -> list[nn.Module]:
    """The modules each decoding step runs: an encoder-decoder's encoder runs once, so it is not repacked."""
    if hasattr(model, "encode") and hasattr(model, "decoder") and hasattr(model, "lm_head"):
        return [model.decoder, model.lm_head]
    return [model]
