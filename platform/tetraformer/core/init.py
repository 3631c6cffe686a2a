"""Weight initialisation: normal(0, init_std), with GPT-2's scaled residual projections as an option."""

from __future__ import annotations

import math

from torch import nn

from tetraformer.core.config import TransformerConfig

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
