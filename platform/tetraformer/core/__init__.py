"""The from-scratch Transformer core: pure PyTorch, imported by every family and task."""

from tetraformer.core.attention import Attention
from tetraformer.core.cache import KVCache, LayerCache
from tetraformer.core.config import PRESETS, TransformerConfig
from tetraformer.core.embeddings import PatchEmbedding, TokenEmbedding
from tetraformer.core.generation import GenerationConfig, beam_search, generate
from tetraformer.core.heads import ClassificationHead, LMHead, MaskedLMHead, TokenClassificationHead
from tetraformer.core.layers import Block, FeedForward, make_norm
from tetraformer.core.masks import causal_mask, combine_masks
from tetraformer.core.models import CausalLM, ImageEncoder, Seq2SeqLM, SequenceClassifier, TextEncoder
from tetraformer.core.sampling import apply_temperature, top_k_filter, top_p_filter
from tetraformer.core.stack import Decoder, Encoder, EncoderDecoder, StackOutput, TransformerStack

__all__ = [
    "PRESETS", "Attention", "Block", "CausalLM", "ClassificationHead", "Decoder", "Encoder", "EncoderDecoder",
    "FeedForward", "ImageEncoder", "KVCache", "LMHead", "LayerCache", "MaskedLMHead", "PatchEmbedding",
    "Seq2SeqLM", "SequenceClassifier", "StackOutput", "TextEncoder", "TokenClassificationHead",
    "TokenEmbedding", "TransformerConfig", "TransformerStack", "causal_mask", "combine_masks", "make_norm",
]  # fmt: skip
__all__ += [
    "GenerationConfig",
    "apply_temperature",
    "beam_search",
    "generate",
    "top_k_filter",
    "top_p_filter",
]
