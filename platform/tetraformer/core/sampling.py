"""Next-token choice from logits: temperature, top-k and nucleus (top-p) filters, greedy and sampling."""

from __future__ import annotations

import torch
from torch import Tensor


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """(B, V) logits divided by a positive temperature (< 1 sharpens, > 1 flattens)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return logits if temperature == 1.0 else logits / temperature


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """(B, V) logits with all but exactly the k largest per row set to -inf (ties broken by topk)."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    values, index = logits.topk(k, dim=-1)  # (B, k) each
    return torch.full_like(logits, float("-inf")).scatter(-1, index, values)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """(B, V) logits keeping per row the smallest set of most likely tokens whose probability reaches p."""
    if p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V) each
    probs = sorted_logits.float().softmax(dim=-1)  # (B, V)
    drop_sorted = probs.cumsum(dim=-1) - probs >= p  # the tokens before this one already reach p
    drop_sorted[..., 0] = False  # always keep the most likely token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def greedy(logits: Tensor) -> Tensor:
    """(B, V) logits -> (B,) most likely token ids."""
    return logits.argmax(dim=-1)


def sample(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """(B, V) logits -> (B,) token ids drawn after temperature, top-k and top-p filtering."""
    logits = top_p_filter(top_k_filter(apply_temperature(logits.float(), temperature), top_k), top_p)
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)[:, 0]
