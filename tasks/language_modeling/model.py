"""GPT: token embedding, any position type, a causal decoder and a tied LM head."""

from __future__ import annotations

from tetraformer.core import CausalLM, TransformerConfig


def build_gpt(cfg: TransformerConfig) -> CausalLM:
    """The core's decoder-only family (every position type; T5's relative buckets are causal here)."""
    if cfg.is_encoder_decoder:
        raise ValueError("GPT is decoder-only: set n_decoder_layers to 0")
    return CausalLM(cfg)
