"""Shared tiny fixtures: seeded, fp32, dropout-free models small enough for 2 CPU cores."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from tetraformer.core import CausalLM, ImageEncoder, Seq2SeqLM, TextEncoder, TransformerConfig

TINY: dict[str, Any] = dict(
    d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=100, max_len=64, dropout=0.0, attn_dropout=0.0
)
FAMILIES: dict[str, type[nn.Module]] = {
    "encoder": TextEncoder,
    "causal": CausalLM,
    "seq2seq": Seq2SeqLM,
    "image": ImageEncoder,
}
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "seq2seq": dict(n_decoder_layers=2),
    "image": dict(image_size=32, patch_size=8, vocab_size=0),
}


def pytest_configure(config: pytest.Config) -> None:
    """Keep the bf16 layout cache of test runs (and their subprocesses) out of the user's ~/.cache."""
    if "TETRAFORMER_CACHE_DIR" not in os.environ:
        os.environ["TETRAFORMER_CACHE_DIR"] = tempfile.mkdtemp(prefix="tetraformer-cache-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `gpu` on machines without CUDA."""
    if torch.cuda.is_available():
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))


@pytest.fixture(autouse=True)
def _seed() -> None:
    """Seed torch so every test sees the same weights and inputs."""
    torch.manual_seed(0)


@pytest.fixture
def tiny_config() -> Callable[..., TransformerConfig]:
    """Factory: the tiny preset (d_model 32, 2 layers, vocab 100, dropout off) with overrides."""

    def make(**overrides: Any) -> TransformerConfig:
        return TransformerConfig.preset("tiny", **{**TINY, **overrides})

    return make


@pytest.fixture
def tiny_model(tiny_config: Callable[..., TransformerConfig]) -> Callable[..., nn.Module]:
    """Factory: a tiny family ("encoder", "causal", "seq2seq", "image") in eval mode, fp32."""

    def make(family: str, **overrides: Any) -> nn.Module:
        cfg = tiny_config(**{**FAMILY_DEFAULTS.get(family, {}), **overrides})
        return FAMILIES[family](cfg).eval()

    return make


@pytest.fixture
def eager_twin() -> Callable[[nn.Module], nn.Module]:
    """Factory: a copy of a model with the same weights that runs the eager attention backend."""

    def make(model: nn.Module) -> nn.Module:
        twin = type(model)(model.cfg.replace(attention="eager")).eval()
        twin.load_state_dict(model.state_dict())
        return twin

    return make


@pytest.fixture
def token_ids() -> Callable[..., torch.Tensor]:
    """Factory: random (batch, length) ids of the tiny vocabulary, avoiding id 0."""

    def make(batch: int, length: int, vocab: int = TINY["vocab_size"]) -> torch.Tensor:
        return torch.randint(1, vocab, (batch, length))

    return make
