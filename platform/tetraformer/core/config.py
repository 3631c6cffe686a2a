"""TransformerConfig: the one typed description of every Tetraformer model, with named presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

Norm = Literal["layernorm", "rmsnorm"]
NormPosition = Literal["pre", "post"]
Activation = Literal["relu", "gelu", "gelu_tanh", "swiglu", "geglu", "geglu_tanh"]
Position = Literal["sinusoidal", "learned", "relative", "rotary", "alibi", "none"]
AttentionBackend = Literal["sdpa", "eager"]
GATED_ACTIVATIONS = ("swiglu", "geglu", "geglu_tanh")


@dataclass
class TransformerConfig:
    """Shape, architecture, regularisation and initialisation of one Transformer."""

    # --- size --------------------------------------------------------------------------------
    d_model: int = 256  # width of the residual stream
    n_heads: int = 4  # attention heads per layer
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
    scale_attention: bool = True  # divide scores by sqrt(d_head); T5 folds this into its init
    scale_embeddings: bool = False  # multiply token embeddings by sqrt(d_model), as the paper does

    # --- position details --------------------------------------------------------------------
    relative_buckets: int = 32  # T5 relative attention buckets
    relative_max_distance: int = 128  # distance beyond which T5 buckets stop growing
    rope_base: float = 10000.0
    rope_fraction: float = 1.0  # share of each head's dims that rotary positions rotate

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
    scaled_residual_init: bool = False  # GPT-2: residual projections get std / sqrt(2 * layers)
    tie_embeddings: bool = True  # LM head shares the token embedding matrix
    rescale_tied_logits: bool = False  # T5 v1.0 multiplies the output by d_model**-0.5 when tied

    def __post_init__(self) -> None:
        """Reject shapes and names that cannot build a model."""
        if self.d_head is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        for name in ("norm", "norm_position", "activation", "position", "attention"):
            allowed = _literal_values(name)
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r}; expected one of {allowed}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_head or self.d_model // self.n_heads

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

    # --- accounting --------------------------------------------------------------------------
    def layer_params(self, cross_attention: bool = False) -> int:
        """Parameters of one layer (attention, optional cross-attention, feed-forward, norms)."""
        d, inner, b = self.d_model, self.inner_dim, int(self.bias)
        attn = 4 * d * inner + int(self.use_qkv_bias) * 3 * inner + b * d
        ffn_in = (2 if self.gated else 1) * (d * self.d_ff + b * self.d_ff)
        ffn = ffn_in + self.d_ff * d + b * d
        n_norms = 3 if cross_attention else 2
        return attn * (2 if cross_attention else 1) + ffn + n_norms * self._norm_params()

    def num_params(self, vision: bool = False) -> int:
        """Backbone parameters: embeddings, positions, stacks and final norms (heads excluded)."""
        d = self.d_model
        embed = d * self.vocab_size if not vision else self._patch_params()
        embed += self.type_vocab_size * d + self._norm_params() * int(self.embedding_norm)
        n_pos = self.max_len if not vision else (self.image_size // self.patch_size) ** 2 + 1
        positions = n_pos * d if self.position == "learned" else 0
        final_norm = self._norm_params() if self.norm_position == "pre" else 0
        bias_table = self.relative_buckets * self.n_heads if self.position == "relative" else 0
        stack = self.n_layers * self.layer_params() + final_norm + bias_table
        if self.is_encoder_decoder:
            decoder = self.n_decoder_layers * self.layer_params(cross_attention=True)
            stack += decoder + final_norm + bias_table
        return embed + positions + stack

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token (forward + backward): 6 N plus attention scores (PaLM, App. B)."""
        t = seq_len or self.max_len
        n_layers = self.n_layers + self.n_decoder_layers
        matmul_params = self.n_layers * self.layer_params() + self.n_decoder_layers * self.layer_params(True)
        matmul_params += self.vocab_size * self.d_model  # the output projection
        return 6.0 * matmul_params + 12.0 * n_layers * self.inner_dim * t

    def _norm_params(self) -> int:
        return self.d_model * (2 if self.norm == "layernorm" and self.bias else 1)

    def _patch_params(self) -> int:
        patch = self.n_channels * self.patch_size**2 * self.d_model + self.d_model  # conv + bias
        return patch + self.d_model  # plus the [CLS] token


def _literal_values(field_name: str) -> tuple[str, ...]:
    """The allowed strings of a Literal-typed config field."""
    kinds = {
        "norm": Norm,
        "norm_position": NormPosition,
        "activation": Activation,
        "position": Position,
        "attention": AttentionBackend,
    }
    return kinds[field_name].__args__


_BERT = dict(
    norm_position="post", norm_eps=1e-12, embedding_norm=True, activation="gelu", position="learned",
    type_vocab_size=2, tie_embeddings=True,
)  # fmt: skip
_GPT2 = dict(norm_position="pre", activation="gelu_tanh", position="learned", scaled_residual_init=True)
_T5 = dict(
    norm="rmsnorm", norm_position="pre", norm_eps=1e-6, activation="relu", position="relative", bias=False,
    scale_attention=False, rescale_tied_logits=True,
)  # fmt: skip
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
    ),  # fmt: skip
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
    ),  # fmt: skip
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
    ),  # fmt: skip
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
    ),  # fmt: skip
    "vit-b/16": dict(
        _VIT,
        d_model=768,
        n_heads=12,
        n_layers=12,
        d_ff=3072,
        image_size=224,
        patch_size=16,
        n_channels=3,
    ),  # fmt: skip
}
