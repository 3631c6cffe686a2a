"""GPT: token embedding, learned or rotary positions, a causal decoder and a tied LM head."""

from __future__ import annotations

from tetraformer.core import CausalLM, TransformerConfig

GPT_POSITIONS = ("learned", "rotary", "alibi", "sinusoidal", "none")


def build_gpt(cfg: TransformerConfig) -> CausalLM:
    """The core's decoder-only family, checked for a position type a decoder can use."""
    if cfg.position not in GPT_POSITIONS:
        raise ValueError(f"GPT position={cfg.position!r}; expected one of {GPT_POSITIONS}")
    if cfg.is_encoder_decoder:
        raise ValueError("GPT is decoder-only: set n_decoder_layers to 0")
    return CausalLM(cfg)
