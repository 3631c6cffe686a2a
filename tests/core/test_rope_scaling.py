"""RoPE frequency scaling (linear, Llama 3): the frequencies transformers computes, and config checks."""

from __future__ import annotations

import pytest
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.core.rope_scaling import rope_frequencies, rope_inv_freq
from tetraformer.errors import OptionError

LLAMA3 = dict(
    rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64
)
YARN = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64)
YARN_TUNED = dict(YARN, factor=8.0, beta_fast=16, beta_slow=2, mscale=1.0, mscale_all_dim=0.5, truncate=False)
SCALINGS = {"linear": dict(rope_type="linear", factor=4.0), "llama3": LLAMA3, "yarn": YARN, "yarn-tuned": YARN_TUNED}


@pytest.mark.parametrize("base", [10000.0, 500000.0])
@pytest.mark.parametrize("kind", SCALINGS)
def test_frequencies_equal_transformers(kind: str, base: float) -> None:
    """rope_frequencies gives transformers' exact frequencies and attention factor for a head, base and scaling."""
    hf = transformers.LlamaConfig(
        hidden_size=128, num_attention_heads=2, rope_parameters={**SCALINGS[kind], "rope_theta": base}
    )
    theirs, factor = ROPE_INIT_FUNCTIONS[SCALINGS[kind]["rope_type"]](hf)
    ours, our_factor = rope_frequencies(64, base, SCALINGS[kind])
    assert torch.equal(ours, theirs) and our_factor == factor
    assert (factor != 1.0) == kind.startswith("yarn")


def test_llama3_scaling_keeps_high_and_divides_low_frequencies() -> None:
    """Llama 3 leaves short wavelengths alone, divides long ones by factor, and differs from plain RoPE between."""
    plain, scaled = rope_inv_freq(64, 500000.0), rope_inv_freq(64, 500000.0, LLAMA3)
    wavelen = 2 * torch.pi / plain
    short, long = wavelen < 64 / 4, wavelen > 64 / 1
    assert short.any() and long.any() and (~short & ~long).any()
    assert torch.equal(scaled[short], plain[short])
    assert torch.allclose(scaled[long], plain[long] / 8)
    assert (
        (scaled[~short & ~long] < plain[~short & ~long]) & (scaled[~short & ~long] > plain[~short & ~long] / 8)
    ).all()


def test_model_uses_the_scaled_frequencies() -> None:
    """A rotary model built with rope_scaling rotates by the scaled frequencies, and its logits change."""
    cfg = TransformerConfig.preset("tiny", position="rotary", rope_base=500000.0)
    plain, scaled = CausalLM(cfg).eval(), CausalLM(cfg.replace(rope_scaling=SCALINGS["linear"])).eval()
    scaled.load_state_dict(plain.state_dict())
    assert torch.equal(scaled.decoder.rotary.inv_freq, plain.decoder.rotary.inv_freq / 4)
    ids = torch.randint(0, 100, (1, 12))
    with torch.no_grad():
        assert not torch.allclose(plain(ids), scaled(ids))


@pytest.mark.parametrize(
    ("scaling", "message"),
    [
        (dict(rope_type="dynamic", factor=2.0), r"rope_scaling.*needs rope_type one of: linear, llama3, yarn"),
        (dict(rope_type="llama3", factor=8.0), r"rope_scaling.*rope_type 'llama3' needs \['low_freq_factor'"),
    ],
)
def test_bad_rope_scaling_is_named(scaling: dict, message: str) -> None:
    """An unknown rope_type or a missing key is an error naming rope_scaling and what it needs."""
    with pytest.raises(OptionError, match=message):
        TransformerConfig(position="rotary", rope_scaling=scaling)
