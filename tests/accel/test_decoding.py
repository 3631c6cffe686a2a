"""The decoding context around the core's generate: the same tokens, faster layouts inside, stock layers after."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor, nn

from tetraformer.accel import decoding
from tetraformer.accel.lm_head_row import RowLinear
from tetraformer.accel.packed import PackedLinear
from tetraformer.core import GenerationConfig, generate


def classes(model: nn.Module) -> dict[str, type]:
    """Each submodule's class by name."""
    return {name: type(m) for name, m in model.named_modules()}


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
@pytest.mark.parametrize("family", ["causal", "seq2seq"])
@pytest.mark.parametrize(("batch", "beams"), [(1, 1), (3, 1), (2, 2)], ids=["one-row", "greedy-3", "beam-2x2"])
def test_decoding_gives_the_same_tokens_and_leaves_stock_layers(
    tiny_model: Callable[..., nn.Module],
    token_ids: Callable[..., Tensor],
    prefer: Callable[..., list[str]],
    family: str,
    batch: int,
    beams: int,
) -> None:
    """One row per step: the LM head's transposed copy; more: packed decoder weights (an encoder runs once, so it
    keeps its own). Greedy and beam tokens equal plain generate's; on exit every layer is a stock nn.Linear again."""
    prefer("packed", "rows")
    model = tiny_model(family)
    ids, config = token_ids(batch, 5), GenerationConfig(max_new_tokens=6, num_beams=beams)
    expected, before = generate(model, ids, None, config), classes(model)
    with decoding(model, batch * beams):
        inside = classes(model)
        out = generate(model, ids, None, config)
    assert torch.equal(out, expected)
    assert classes(model) == before
    swapped = {name for name, cls in inside.items() if cls is not before[name]}
    if batch * beams == 1:
        assert swapped == {"lm_head.proj"} and inside["lm_head.proj"] is RowLinear
    else:
        assert swapped and {inside[name] for name in swapped} == {PackedLinear}
        assert not any(name.startswith("encoder.") for name in swapped)
