"""TransformerConfig: the one typed description of every Tetraformer model, with named presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from tetraformer.core.positions import POSITION_TYPES, Position, PositionType
from tetraformer.core.rope_scaling import ROPE_SCALINGS
from tetraformer.errors import above, at_least, probability, require

Norm = Literal["layernorm", "rmsnorm"]
NormPosition = Literal["pre", "post"]
Activation = Literal["relu", "gelu", "gelu_tanh", "swiglu", "geglu", "geglu_tanh"]
AttentionBackend = Literal["sdpa", "eager"]
InitScheme = Literal["normal", "t5"]
GATED_ACTIVATIONS = ("swiglu", "geglu", "geglu_tanh")


@dataclass
class TransformerConfig:
    """Shape, architecture, regularisation and initialisation of one Transformer."""

    # --- size --------------------------------------------------------------------------------
    d_model: int = 256  # width of the residual stream
    n_heads: int = 4  # attention heads per layer
    n_kv_heads: int | None = None  # key/value heads (grouped-query attention; 1: multi-query); None means n_heads
    n_layers: int = 4  # layers of the (encoder or decoder-only) stack
    n_decoder_layers: int = 0  # > 0 makes an encoder-decoder: layers of its decoder
    d_ff: int = 1024  # hidden width of the feed-forward block
    d_head: int | None = None  # per-head width; None means d_model // n_heads
    vocab_size: int = 8192  # token vocabulary (0 for vision-only models)
    type_vocab_size: int = 0  # segment (token type) vocabulary, 2 for BERT; 0 disables it
    max_len: int = 512  # longest sequence the position table covers

    # --- architecture ------------------------------------------------------------------------
    norm: Norm = "layernorm"
    norm_position: NormPosition = "pre"  # post: the 2017 paper and BERT; pre: GPT-2, T5, ViT
    norm_eps: float = 1e-5
    embedding_norm: bool = False  # BERT normalises the summed embeddings
    activation: Activation = "gelu"
    position: Position = "learned"
    bias: bool = True  # biases on every linear layer and norm
    qkv_bias: bool | None = None  # biases on the Q/K/V projections; None follows `bias`
    attention: AttentionBackend = "sdpa"  # eager can return attention weights
    qk_norm: bool = False  # normalise each head's queries and keys (the config's norm over d_head) before RoPE
    sliding_window: int | None = None  # causal self-attention sees only this many latest keys (itself included)
    scale_attention: bool = True  # divide scores by sqrt(d_head); T5 folds this into its init
    scale_embeddings: bool = False  # multiply token embeddings by sqrt(d_model), as the paper does

    # --- position details --------------------------------------------------------------------
    relative_buckets: int = 32  # T5 relative attention buckets
    relative_max_distance: int = 128  # distance beyond which T5 buckets stop growing
    rope_base: float = 10000.0
    rope_fraction: float = 1.0  # share of each head's dims that rotary positions rotate
    # rotary frequency scaling: {"rope_type": "linear", "factor": F}, Llama 3's {"rope_type": "llama3", "factor",
    # "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"} or {"rope_type": "yarn", "factor",
    # "original_max_position_embeddings", ...} (core/rope_scaling.py); None: plain RoPE
    rope_scaling: dict[str, Any] | None = None

    # --- vision (ViT) ------------------------------------------------------------------------
    image_size: int = 224
    patch_size: int = 16
    n_channels: int = 3

    # --- regularisation ----------------------------------------------------------------------
    dropout: float = 0.0  # embeddings and residual branches
    attn_dropout: float = 0.0  # attention probabilities
    ffn_dropout: float = 0.0  # inside the feed-forward block, after the activation

    # --- initialisation and heads ------------------------------------------------------------
    init_std: float = 0.02
    init_scheme: InitScheme = "normal"  # t5: Mesh TensorFlow's fan-in stds, for models without scale_attention
    scaled_residual_init: bool = False  # GPT-2: residual projections get std / sqrt(2 * layers)
    tie_embeddings: bool = True  # LM head shares the token embedding matrix
    rescale_tied_logits: bool = False  # T5 v1.0 multiplies the output by d_model**-0.5 when tied

    # --- training memory ---------------------------------------------------------------------
    activation_checkpointing: bool = False  # recompute each block in backward: less memory, ~1/3 more compute

    def __post_init__(self) -> None:
        """Reject shapes, rates and names that cannot build a model: an OptionError names the field."""
        at_least(self, 1, d_model=self.d_model, n_heads=self.n_heads, n_layers=self.n_layers, d_ff=self.d_ff)
        at_least(self, 1, n_kv_heads=self.n_kv_heads, sliding_window=self.sliding_window, d_head=self.d_head)
        at_least(self, 1, max_len=self.max_len, relative_buckets=self.relative_buckets)
        at_least(self, 1, relative_max_distance=self.relative_max_distance, image_size=self.image_size)
        at_least(self, 1, patch_size=self.patch_size, n_channels=self.n_channels)
        at_least(self, 0, n_decoder_layers=self.n_decoder_layers, vocab_size=self.vocab_size, init_std=self.init_std)
        at_least(self, 0, type_vocab_size=self.type_vocab_size)
        above(self, 0, norm_eps=self.norm_eps, rope_base=self.rope_base)
        probability(self, dropout=self.dropout, attn_dropout=self.attn_dropout, ffn_dropout=self.ffn_dropout)
        fraction_ok = 0 < self.rope_fraction <= 1
        require(self, "rope_fraction", self.rope_fraction, fraction_ok, "must be more than 0 and at most 1")
        self._check_rope_scaling()
        divides = self.d_head is not None or self.d_model % self.n_heads == 0
        require(self, "n_heads", self.n_heads, divides, f"must divide d_model={self.d_model} (or set d_head)")
        groups = self.n_heads % self.kv_heads == 0
        require(self, "n_kv_heads", self.n_kv_heads, groups, f"must divide n_heads={self.n_heads}")
        patches = self.image_size % self.patch_size == 0
        require(self, "image_size", self.image_size, patches, f"must be a multiple of patch_size={self.patch_size}")
        for name in ("norm", "norm_position", "activation", "position", "attention", "init_scheme"):
            allowed = _literal_values(name)
            value = getattr(self, name)
            require(self, name, value, value in allowed, f"must be one of: {', '.join(allowed)}")

    def _check_rope_scaling(self) -> None:
        """rope_scaling names a known rope_type and gives every key that type needs."""
        if self.rope_scaling is None:
            return
        kind = self.rope_scaling.get("rope_type")
        known = kind in ROPE_SCALINGS
        require(self, "rope_scaling", self.rope_scaling, known, f"needs rope_type one of: {', '.join(ROPE_SCALINGS)}")
        missing = [k for k in ROPE_SCALINGS[kind] if k not in self.rope_scaling]
        require(self, "rope_scaling", self.rope_scaling, not missing, f"rope_type {kind!r} needs {missing}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_head or self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """Key/value heads: n_kv_heads, or n_heads when unset."""
        return self.n_kv_heads or self.n_heads

    @property
    def inner_dim(self) -> int:
        """Width of all heads together (d_model unless d_head is set)."""
        return self.head_dim * self.n_heads

    @property
    def use_qkv_bias(self) -> bool:
        """Whether the Q/K/V projections have biases."""
        return self.bias if self.qkv_bias is None else self.qkv_bias

    @property
    def is_encoder_decoder(self) -> bool:
        """True when the config describes an encoder plus a cross-attending decoder."""
        return self.n_decoder_layers > 0

    @property
    def position_type(self) -> PositionType:
        """What the `position` setting is (see positions.POSITION_TYPES)."""
        return POSITION_TYPES[self.position]

    @property
    def absolute_positions(self) -> bool:
        """True when positions are a table added to the embeddings, so sequences are bounded by max_len."""
        return self.position_type.absolute

    @property
    def gated(self) -> bool:
        """True for GLU-style feed-forward blocks (two input projections)."""
        return self.activation in GATED_ACTIVATIONS

    def replace(self, **changes: Any) -> TransformerConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form, for checkpoints and logs."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TransformerConfig:
        """Build from a dict, naming any key that is not a field."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ValueError(f"unknown TransformerConfig fields: {unknown}")
        return cls(**values)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> TransformerConfig:
        """A named preset (see PRESETS), with optional field overrides."""
        if name not in PRESETS:
            raise KeyError(f"unknown preset {name!r}; known presets: {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


def _literal_values(field_name: str) -> tuple[str, ...]:
    """The allowed strings of a Literal-typed config field."""
    kinds = {
        "norm": Norm,
        "norm_position": NormPosition,
        "activation": Activation,
        "position": Position,
        "attention": AttentionBackend,
        "init_scheme": InitScheme,
    }
    return kinds[field_name].__args__


_BERT = dict(
    norm_position="post",
    norm_eps=1e-12,
    embedding_norm=True,
    activation="gelu",
    position="learned",
    type_vocab_size=2,
    tie_embeddings=True,
)
_GPT2 = dict(norm_position="pre", activation="gelu_tanh", position="learned", scaled_residual_init=True)
_T5 = dict(
    norm="rmsnorm",
    norm_position="pre",
    norm_eps=1e-6,
    activation="relu",
    position="relative",
    bias=False,
    scale_attention=False,
    rescale_tied_logits=True,
    init_scheme="t5",
)
_VIT = dict(norm_position="pre", norm_eps=1e-12, activation="gelu", position="learned", vocab_size=0)

PRESETS: dict[str, dict[str, Any]] = {
    # generic sizes, GPT-2-style pre-norm blocks
    "tiny": dict(d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=100, max_len=64),
    "mini": dict(d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256),
    "small": dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048, max_len=512),
    "base": dict(d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=1024),
    # the 2017 paper's base model: post-norm, relu, sinusoidal, scaled embeddings
    "transformer-base": dict(
        d_model=512,
        n_heads=8,
        n_layers=6,
        n_decoder_layers=6,
        d_ff=2048,
        vocab_size=37000,
        norm_position="post",
        activation="relu",
        position="sinusoidal",
        scale_embeddings=True,
        dropout=0.1,
    ),
    # shapes of the published checkpoints
    "bert-base": dict(
        _BERT,
        d_model=768,
        n_heads=12,
        n_layers=12,
        d_ff=3072,
        vocab_size=30522,
        max_len=512,
        dropout=0.1,
        attn_dropout=0.1,
    ),
    "gpt2": dict(
        _GPT2,
        d_model=768,
        n_heads=12,
        n_layers=12,
        d_ff=3072,
        vocab_size=50257,
        max_len=1024,
        dropout=0.1,
        attn_dropout=0.1,
    ),
    "t5-small": dict(
        _T5,
        d_model=512,
        n_heads=8,
        n_layers=6,
        n_decoder_layers=6,
        d_ff=2048,
        vocab_size=32128,
        d_head=64,
        dropout=0.1,
    ),
    "vit-b/16": dict(
        _VIT,
        d_model=768,
        n_heads=12,
        n_layers=12,
        d_ff=3072,
        image_size=224,
        patch_size=16,
        n_channels=3,
    ),
}
