"""Timing candidates on a cold cache leaves the process as it found it: above all, the global random stream."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tetraformer.accel import chooser, chosen_attention
from tetraformer.accel.chooser import NATURAL, LayoutChooser, machine_key
from tetraformer.accel.chosen_attention import choose, use_chosen_attention
from tetraformer.accel.linear_cross_entropy import lm_loss
from tetraformer.accel.lm_head_row import transposed_row_faster
from tetraformer.accel.packed import packed_faster
from tetraformer.core import Attention, LMHead, TransformerConfig


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
    """Every kind of timed choice (bf16 layouts, packed weights, the one-row head copy), made for real on an empty
    cache, and the LM loss in training and in inference, leave the RNG state, threads, grad mode and autocast
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
    assert len(json.loads(path.read_text())[machine_key()]) >= 5  # every choice made (bf16: the head's layouts too)
    assert_unchanged(before, after)


def assert_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    """The two global states are the same."""
    assert torch.equal(before.pop("rng"), after.pop("rng"))
    assert before == after


def cold_attention_chooser(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """The attention chooser with the real timer on an empty cache file; kernels measured, not forced."""
    module = chosen_attention
    chooser = LayoutChooser(path=path, machine=lambda: "m", name=path.name, margin=module.MARGIN)
    monkeypatch.setattr(module, "CHOOSER", chooser)
    monkeypatch.delenv("TETRAFORMER_ATTENTION", raising=False)


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
def test_timing_attention_kernels_draws_nothing_from_the_global_rng(
    autocast: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every attention kernel timed for real, forward and backward with attention dropout, on an empty cache,
    leaves the RNG state, threads, grad mode and autocast state as they were."""
    path = tmp_path / "attention_kernels.json"
    cold_attention_chooser(monkeypatch, path)
    q, k, bias = torch.randn(2, 2, 8, 16, requires_grad=True), torch.randn(2, 2, 8, 16), torch.randn(1, 2, 8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else nullcontext():
        before = global_state()
        for query in (q, q.detach()):  # training, inference
            for mask, causal in ((None, True), (bias, False)):
                choose(query, k, mask, causal, 0.25, 0.5, 2)
        after = global_state()
    assert len(json.loads(path.read_text())["m"]) == 4  # everything was timed, not read from a cache
    assert torch.equal(before.pop("rng"), after.pop("rng"))
    assert before == after


def test_a_cold_attention_cache_leaves_training_outputs_and_random_stream_as_a_warm_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A layer with attention dropout, run from one seed on an empty cache (timing) and again on the filled one,
    gives the same output and leaves the random stream in the same state: timing draws nothing from it."""
    path = tmp_path / "attention_kernels.json"
    cold_attention_chooser(monkeypatch, path)
    cfg = TransformerConfig(d_model=32, n_heads=2, n_layers=1, d_ff=64, vocab_size=50, max_len=32, attn_dropout=0.5)
    layer, x = Attention(cfg).train(), torch.randn(2, 8, 32)
    use_chosen_attention(layer)
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        runs.append((layer(x, is_causal=True)[0], torch.random.get_rng_state()))
    assert len(json.loads(path.read_text())["m"]) == 1  # the first run timed the kernels, the second read them
    assert torch.equal(runs[0][0], runs[1][0])
    assert torch.equal(runs[0][1], runs[1][1])
