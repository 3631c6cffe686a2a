"""Weight initialisation: normal(0, init_std), zero biases, unit norms, GPT-2's scaled residual projections."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from tetraformer.core import CausalLM, TransformerConfig


def _std(tensors: list[torch.Tensor]) -> float:
    """Standard deviation of all entries of several tensors together."""
    return torch.cat([t.flatten() for t in tensors]).std().item()


@pytest.mark.parametrize("scaled", [False, True])
def test_init_statistics(tiny_config: Callable[..., TransformerConfig], scaled: bool) -> None:
    """Weights ~ N(0, 0.02); residual projections ~ N(0, 0.02 / sqrt(2 L)) when scaled; biases 0; norms 1."""
    cfg = tiny_config(d_model=64, d_ff=256, n_layers=4, scaled_residual_init=scaled)
    model = CausalLM(cfg)
    residual = [p for n, p in model.named_parameters() if n.endswith(("out.weight", "down.weight"))]
    others = [p for n, p in model.named_parameters() if n.endswith(("qkv.weight", "up.weight"))]
    expected = 0.02 / math.sqrt(2 * 4) if scaled else 0.02
    assert _std(residual) == pytest.approx(expected, rel=0.05)
    assert _std(others) == pytest.approx(0.02, rel=0.05)
    assert _std([model.embed.tokens.weight]) == pytest.approx(0.02, rel=0.05)
    for name, param in model.named_parameters():
        if name.endswith("bias") and "norm" not in name:
            assert torch.all(param == 0), name
        elif "norm" in name:
            assert torch.all(param == (1 if name.endswith("weight") else 0)), name
