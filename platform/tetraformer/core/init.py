"""Weight initialisation: normal(0, init_std), with GPT-2's scaled residual projections as an option,
or T5's fan-in scheme (Mesh TensorFlow), which stands in for the 1/sqrt(d_head) that T5 leaves out of attention.
"""

from __future__ import annotations

import math

from torch import nn

from tetraformer.core.attention import Attention
from tetraformer.core.config import TransformerConfig
from tetraformer.core.embeddings import TokenEmbedding
from tetraformer.core.heads import LMHead
from tetraformer.core.layers import FeedForward
from tetraformer.core.positions import RelativePositionBias

RESIDUAL_PROJECTIONS = ("out.weight", "down.weight")  # the last linear of each residual branch


def init_weights(model: nn.Module, cfg: TransformerConfig) -> None:
    """Initialise every linear, conv and embedding weight in place; biases to zero, norms to one."""
    n_layers = cfg.n_layers + cfg.n_decoder_layers
    residual_std = cfg.init_std / math.sqrt(2 * n_layers) if cfg.scaled_residual_init else cfg.init_std
    for module in model.modules():
        if isinstance(module, nn.Linear | nn.Conv2d | nn.Embedding):
            nn.init.normal_(module.weight, 0.0, cfg.init_std)
        if isinstance(module, nn.Linear | nn.Conv2d) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm | nn.RMSNorm):
            module.reset_parameters()
    for name, param in model.named_parameters():
        if name.endswith(RESIDUAL_PROJECTIONS):
            nn.init.normal_(param, 0.0, residual_std)
        elif name.endswith("cls"):
            nn.init.normal_(param, 0.0, cfg.init_std)
    if cfg.init_scheme == "t5":
        t5_init(model, cfg)


def t5_init(model: nn.Module, cfg: TransformerConfig) -> None:
    """T5's stds: embeddings and an untied LM head 1, Q (d_model * d_head)^-1/2, K/V and FFN-in d_model^-1/2,
    attention output (heads * d_head)^-1/2, FFN-out d_ff^-1/2, relative bias d_model^-1/2 (as transformers)."""
    d_in = cfg.d_model**-0.5
    for module in model.modules():
        if isinstance(module, TokenEmbedding):
            nn.init.normal_(module.tokens.weight, 0.0, 1.0)
        elif isinstance(module, LMHead) and not cfg.tie_embeddings:
            nn.init.normal_(module.proj.weight, 0.0, 1.0)
        elif isinstance(module, RelativePositionBias):
            nn.init.normal_(module.bias.weight, 0.0, d_in)
        elif isinstance(module, FeedForward):
            nn.init.normal_(module.up.weight, 0.0, d_in)
            nn.init.normal_(module.down.weight, 0.0, cfg.d_ff**-0.5)
        elif isinstance(module, Attention):
            _t5_attention_init(module, cfg)


def _t5_attention_init(attn: Attention, cfg: TransformerConfig) -> None:
    """Q rows (d_model * d_head)^-1/2, K and V rows d_model^-1/2, output (heads * d_head)^-1/2."""
    q_std, kv_std = (cfg.d_model * cfg.head_dim) ** -0.5, cfg.d_model**-0.5
    if attn.cross:
        nn.init.normal_(attn.q.weight, 0.0, q_std)
        nn.init.normal_(attn.kv.weight, 0.0, kv_std)
    else:
        nn.init.normal_(attn.qkv.weight[: attn.inner], 0.0, q_std)  # (inner, D) of the fused (3 inner, D)
        nn.init.normal_(attn.qkv.weight[attn.inner :], 0.0, kv_std)
    nn.init.normal_(attn.out.weight, 0.0, attn.inner**-0.5)
