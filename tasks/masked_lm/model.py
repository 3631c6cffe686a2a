"""BERT for pretraining: a TextEncoder with the masked-LM head and, optionally, the next-sentence head."""

from __future__ import annotations

from tetraformer.core import MaskedLM, TransformerConfig, build_backbone


def build_bert(cfg: TransformerConfig, next_sentence: bool = False) -> MaskedLM:
    """The core's masked LM on an encoder backbone; NSP needs two segment embeddings."""
    if next_sentence and cfg.type_vocab_size < 2:
        raise ValueError(f"next-sentence prediction needs type_vocab_size >= 2, got {cfg.type_vocab_size}")
    return MaskedLM(build_backbone(cfg, "encoder"), next_sentence=next_sentence)
