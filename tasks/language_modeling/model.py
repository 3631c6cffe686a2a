"""GPT: token embedding, learned or rotary positions, a causal decoder and a tied LM head."""

from __future__ import annotations

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.core.positions import DECODER_ONLY_POSITIONS


def build_gpt(cfg: TransformerConfig) -> CausalLM:
    """The core's decoder-only family, checked for a position type a decoder can use."""
    if not cfg.position_type.decoder_only:
        raise ValueError(f"GPT position={cfg.position!r}; expected one of {DECODER_ONLY_POSITIONS}")
    if cfg.is_encoder_decoder:
        raise ValueError("GPT is decoder-only: set n_decoder_layers to 0")
    return CausalLM(cfg)
