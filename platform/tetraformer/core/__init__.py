"""The from-scratch Transformer core: pure PyTorch, imported by every family and task."""

from tetraformer.core.accounting import count_params, flops_per_token
from tetraformer.core.attention import Attention
from tetraformer.core.backbones import (
    BACKBONE_KINDS,
    BackboneKind,
    ImageEncoder,
    TextDecoder,
    TextEncoder,
    TextEncoderDecoder,
    build_backbone,
)
from tetraformer.core.cache import KVCache, LayerCache
from tetraformer.core.config import PRESETS, TransformerConfig
from tetraformer.core.embeddings import PatchEmbedding, TokenEmbedding, resize_position_grid
from tetraformer.core.generation import GenerationConfig, beam_search, generate
from tetraformer.core.heads import ClassificationHead, LMHead, MaskedLMHead, TokenClassificationHead
from tetraformer.core.layers import Block, FeedForward, make_norm
from tetraformer.core.masks import causal_mask, combine_masks
from tetraformer.core.models import CausalLM, MaskedLM, Seq2SeqLM, SequenceClassifier, TokenClassifier
from tetraformer.core.positions import POSITION_TYPES
from tetraformer.core.sampling import apply_temperature, top_k_filter, top_p_filter
from tetraformer.core.stack import Decoder, Encoder, StackOutput, TransformerStack

__all__ = [
    "BACKBONE_KINDS",
    "POSITION_TYPES",
    "PRESETS",
    "Attention",
    "BackboneKind",
    "Block",
    "CausalLM",
    "ClassificationHead",
    "Decoder",
    "Encoder",
    "FeedForward",
    "ImageEncoder",
    "KVCache",
    "LMHead",
    "LayerCache",
    "MaskedLM",
    "MaskedLMHead",
    "PatchEmbedding",
    "Seq2SeqLM",
    "SequenceClassifier",
    "StackOutput",
    "TextDecoder",
    "TextEncoder",
    "TextEncoderDecoder",
    "TokenClassificationHead",
    "TokenClassifier",
    "TokenEmbedding",
    "TransformerConfig",
    "TransformerStack",
    "build_backbone",
    "causal_mask",
    "combine_masks",
    "count_params",
    "flops_per_token",
    "make_norm",
]
__all__ += [
    "GenerationConfig",
    "apply_temperature",
    "beam_search",
    "generate",
    "resize_position_grid",
    "top_k_filter",
    "top_p_filter",
]
