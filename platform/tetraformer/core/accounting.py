"""Size and training cost of a BUILT model, read from its modules (build on the meta device to count free)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torch import nn

from tetraformer.core.attention import Attention


def count_params(model: nn.Module, exclude: Iterable[str] = ()) -> int:
    """Parameters of the model, each tied tensor once, leaving out the named submodules (e.g. "lm_head").

    A parameter shared with a kept module (a tied LM head's embedding) still counts: it is named after
    its first owner.
    """
    prefixes = tuple(f"{name}." for name in exclude)
    return sum(p.numel() for name, p in model.named_parameters() if not name.startswith(prefixes))


@dataclass(frozen=True)
class TokenCost:
    """Training FLOPs (forward + backward) of one token through a model, split by what each part scales with."""

    weights: float  # 6 x the matmul weights a token passes through
    scores: float  # 12 x the self-attention inner widths: x the length the token attends over
    cross: float  # 12 x the cross-attention inner widths: x the source length

    def flops(self, tokens: float, length: float, source_length: float = 0.0) -> float:
        """FLOPs of `tokens` tokens attending over `length` positions (and `source_length` source positions)."""
        return tokens * (self.weights + self.scores * length + self.cross * source_length)


def token_cost(model: nn.Module, exclude: Iterable[str] = ()) -> TokenCost:
    """Per-token training cost of a model, leaving out the named submodules, after PaLM's Appendix B.

    6 x the weights of every Linear (each applied once per token: Q/K/V, outputs, feed-forward, heads, the
    output projection even when tied to the embedding) and of every patchifying Conv2d (one matmul per patch);
    12 x layers x inner width per attended position, for the attention scores and their weighted sum.
    Embedding lookups and norms are not matmuls.
    """
    prefixes = tuple(f"{name}." for name in exclude)
    kept = [m for name, m in model.named_modules() if not f"{name}.".startswith(prefixes)]
    matmul = sum(m.weight.numel() for m in kept if isinstance(m, nn.Linear | nn.Conv2d))
    attention = [m for m in kept if isinstance(m, Attention)]
    self_inner = sum(m.inner for m in attention if not m.cross)
    cross_inner = sum(m.inner for m in attention if m.cross)
    return TokenCost(6.0 * matmul, 12.0 * self_inner, 12.0 * cross_inner)


def flops_per_token(model: nn.Module, seq_len: int) -> float:
    """Training FLOPs per token at sequence length T (token_cost; cross-attention scores are left to the caller)."""
    return token_cost(model).flops(1, seq_len)
