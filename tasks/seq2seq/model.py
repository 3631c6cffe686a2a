"""T5 / the 2017 Transformer: a shared embedding, an encoder, a cross-attending decoder and an LM head."""

from __future__ import annotations

from tetraformer.core import Seq2SeqLM, TransformerConfig


def build_seq2seq(cfg: TransformerConfig) -> Seq2SeqLM:
    """The core's encoder-decoder family, checked to have a decoder."""
    if not cfg.is_encoder_decoder:
        raise ValueError("seq2seq needs an encoder-decoder: set arch.n_decoder_layers > 0")
    return Seq2SeqLM(cfg)
