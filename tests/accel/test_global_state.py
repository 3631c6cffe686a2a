"""Timing candidates on a cold cache leaves the process as it found it: above all, the global random stream."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tetraformer.accel import chooser
from tetraformer.accel.chooser import NATURAL, LayoutChooser, machine_key
from tetraformer.accel.linear_cross_entropy import lm_loss
from tetraformer.accel.lm_head_row import transposed_row_faster
from tetraformer.accel.packed import packed_faster
from tetraformer.core import LMHead, TransformerConfig


def global_state() -> dict[str, Any]:
    """What a run's results or speed depend on that timing could change."""
    return {
        "rng": torch.random.get_rng_state(),
        "threads": torch.get_num_threads(),
        "grad": torch.is_grad_enabled(),
        "autocast": (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")),
        "dtype": torch.get_default_dtype(),
    }


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
def test_choosing_on_a_cold_cache_draws_nothing_from_the_global_rng(
    autocast: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every kind of choice (bf16 layouts, packed weights, the one-row head copy, the LM loss's path in training
    and in inference), timed for real on an empty cache, leaves the RNG state, threads, grad mode and autocast
    state as they were."""
    path = tmp_path / "layouts.json"
    monkeypatch.setattr(chooser, "CHOOSER", LayoutChooser(path=path))  # the real timer
    layer = nn.Linear(24, 56, bias=False)
    head = LMHead(TransformerConfig.preset("tiny", d_model=24, vocab_size=56))
    h, targets = torch.randn(2, 5, 24, requires_grad=True), torch.randint(0, 56, (2, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else nullcontext():
        before = global_state()
        for product in NATURAL:
            chooser.CHOOSER.layout(product, (40, 24, 56))
        packed_faster(layer, rows=4)
        transposed_row_faster(layer.weight)
        lm_loss(head, h, targets)
        with torch.no_grad():
            inside = global_state()
            lm_loss(head, h, targets)
            assert_unchanged(inside, global_state())
        after = global_state()
    assert len(json.loads(path.read_text())[machine_key()]) == 7  # everything was timed, not read from a cache
    assert_unchanged(before, after)


def assert_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    """The two global states are the same."""
    assert torch.equal(before.pop("rng"), after.pop("rng"))
    assert before == after
