"""Attention weights of any backbone for pictures: per-layer maps, attention rollout, [CLS] -> patch grids.

The weights come from the eager attention path (`output_attentions=True`), whatever backend the model's
config names; everything else of the forward pass is unchanged. The core returns tensors; it never plots.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from tetraformer.core.backbones import TextEncoderDecoder

Weights = tuple[Tensor, ...]  # one (B, H, T, S) tensor per layer


def backbone_of(net: nn.Module) -> nn.Module:
    """The backbone a task network sits on (`net.backbone`), or the network itself (CausalLM, Seq2SeqLM)."""
    backbone = getattr(net, "backbone", None)
    return backbone if isinstance(backbone, nn.Module) else net


@torch.no_grad()
def image_attentions(backbone: nn.Module, pixel_values: Tensor) -> Weights:
    """(B, C, H, W) images -> each encoder layer's (B, H, 1 + N, 1 + N) self-attention over [CLS] + patches."""
    return backbone.forward_features(pixel_values, output_attentions=True).attentions


@torch.no_grad()
def text_attentions(
    backbone: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    decoder_input_ids: Tensor | None = None,
) -> dict[str, Weights]:
    """Every layer's attention weights of a text backbone, by kind.

    "self": the (only, or encoder's) stack's self-attention (B, H, S, S). An encoder-decoder given (B, T)
    decoder ids adds "decoder" (B, H, T, T) and "cross" (B, H, T, S: decoder queries over source tokens).
    """
    if not isinstance(backbone, TextEncoderDecoder):
        out = backbone.forward_features(input_ids, attention_mask=attention_mask, output_attentions=True)
        return {"self": out.attentions}
    encoded = backbone.encode(input_ids, attention_mask, output_attentions=True)
    maps = {"self": encoded.attentions}
    if decoder_input_ids is not None:
        memory = encoded.last_hidden_state  # (B, S, D)
        decoded = backbone.decode(decoder_input_ids, memory, attention_mask, output_attentions=True)
        maps.update(decoder=decoded.attentions, cross=decoded.cross_attentions)
    return maps


def attention_rollout(weights: Sequence[Tensor], residual: bool = True) -> Tensor:
    """Attention rollout (Abnar & Zuidema 2020): how much each output position draws on each input position.

    Per layer, heads are averaged; with `residual` the identity is added for the skip connection and rows
    are renormalised; the layers' matrices are then multiplied from the first up. (B, T, T), rows sum to 1.
    """
    if not weights:
        raise ValueError("attention rollout needs at least one layer's weights")
    rollout: Tensor | None = None
    for layer in weights:  # (B, H, T, T)
        mixed = layer.float().mean(dim=1)  # (B, T, T)
        if residual:
            mixed = mixed + torch.eye(mixed.shape[-1], device=mixed.device)
            mixed = mixed / mixed.sum(dim=-1, keepdim=True)
        rollout = mixed if rollout is None else mixed @ rollout
    return rollout


def cls_patch_map(attention: Tensor, grid: tuple[int, int]) -> Tensor:
    """(..., 1 + N, 1 + N) attention or rollout -> (..., gh, gw): how much [CLS] takes from each patch."""
    gh, gw = grid
    if attention.shape[-1] != 1 + gh * gw:
        raise ValueError(f"{attention.shape[-1]} positions do not make [CLS] + a {gh}x{gw} patch grid")
    return attention[..., 0, 1:].reshape(*attention.shape[:-2], gh, gw)


def patch_grid(backbone: nn.Module, pixel_values: Tensor) -> tuple[int, int]:
    """The (rows, columns) of patches an image backbone cuts (B, C, H, W) images into."""
    patch = backbone.cfg.patch_size
    return pixel_values.shape[-2] // patch, pixel_values.shape[-1] // patch
