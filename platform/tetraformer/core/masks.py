"""One mask convention: boolean tensors where True means "may attend"."""

from __future__ import annotations

import torch
from torch import Tensor


def causal_mask(
    q_len: int,
    k_len: int,
    offset: int = 0,
    device: torch.device | None = None,
    window: int | None = None,
    k_start: int = 0,
) -> Tensor:
    """(Tq, Tk) mask: query i (absolute position offset + i) may attend key j (position k_start + j) when
    it is not later, and, with a sliding window, one of the `window` latest positions (the query's own included)."""
    q_pos = torch.arange(q_len, device=device)[:, None] + offset
    k_pos = torch.arange(k_len, device=device)[None, :] + k_start
    mask = k_pos <= q_pos
    return mask & (k_pos > q_pos - window) if window is not None else mask


def combine_masks(
    key_padding: Tensor | None,
    causal: bool,
    q_len: int,
    k_len: int,
    offset: int = 0,
    device: torch.device | None = None,
    window: int | None = None,
    k_start: int = 0,
    documents: Tensor | None = None,
) -> Tensor | None:
    """Merge a (B, Tk) key-padding mask, an optional causal mask and (B, T) document ids into (B|1, 1, Tq, Tk).

    The keys are positions k_start..k_start+Tk; `window` makes the causal mask a sliding window (causal_mask).

    With `documents` (self-attention without a cache: Tq == Tk), a query attends only keys of its own document,
    so examples packed into one row never see each other. None when nothing masks.
    A query row with no key it may attend (a padding query before any real key under a causal mask)
    is allowed to attend every key instead: its output is never used, and this keeps softmax finite.
    """
    mask = None
    if key_padding is not None:
        mask = key_padding.bool()[:, None, None, :]  # (B, 1, 1, Tk)
    if causal:
        device = key_padding.device if key_padding is not None else device
        cm = causal_mask(q_len, k_len, offset, device, window, k_start)[None, None]  # (1, 1, Tq, Tk)
        mask = cm if mask is None else mask & cm
    if documents is not None:
        same = (documents[:, :, None] == documents[:, None, :])[:, None]  # (B, 1, T, T)
        mask = same if mask is None else mask & same
    if mask is None:
        return None
    mask = mask.expand(mask.shape[0], 1, q_len, k_len)
    return mask | ~mask.any(dim=-1, keepdim=True)


def mask_to_bias(mask: Tensor | None, bias: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """Fold a boolean mask into an additive float bias (-inf where attention is not allowed)."""
    if mask is None:
        return bias
    if bias is None:
        return mask
    return bias.to(dtype).masked_fill(~mask, float("-inf"))
