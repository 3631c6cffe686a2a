"""Size and training cost of a BUILT model, read from its modules (build on the meta device to count free)."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from tetraformer.core.attention import Attention


def count_params(model: nn.Module, exclude: Iterable[str] = ()) -> int:
    """Parameters of the model, each tied tensor once, leaving out the named submodules (e.g. "lm_head").

    A parameter shared with a kept module (a tied LM head's embedding) still counts: it is named after
    its first owner.
    """
    prefixes = tuple(f"{name}." for name in exclude)
    return sum(p.numel() for name, p in model.named_parameters() if not name.startswith(prefixes))


def flops_per_token(model: nn.Module, seq_len: int) -> float:
    """Training FLOPs per token (forward + backward) at sequence length T, after PaLM's Appendix B.

    6 x the weights of every Linear (each applied once per token: Q/K/V, outputs, feed-forward, heads,
    the output projection even when tied to the embedding) + 12 x layers x inner width x T for the
    self-attention scores and their weighted sum. Cross-attention scores depend on the source length and
    are left to the caller; embedding lookups and norms are not matmuls.
    """
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    attention = sum(m.inner for m in model.modules() if isinstance(m, Attention) and not m.cross)
    return 6.0 * matmul + 12.0 * attention * seq_len
