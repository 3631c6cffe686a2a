"""Task heads that sit on a backbone's features: LM, masked LM, sequence and token classification."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.core import matmul_layout
from tetraformer.core.config import TransformerConfig
from tetraformer.core.layers import ACTIVATIONS, make_norm
from tetraformer.core.linear import Linear

Pooling = Literal["cls", "mean", "last", "decoder"]  # decoder: a one-step decoder state (encoder-decoder)
POOLINGS: tuple[str, ...] = get_args(Pooling)


class LMHead(nn.Module):
    """Hidden states -> vocabulary logits, optionally sharing the token embedding matrix."""

    def __init__(self, cfg: TransformerConfig, embedding: nn.Embedding | None = None) -> None:
        super().__init__()
        self.proj = Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings and embedding is not None:
            self.proj.weight = embedding.weight
        self.scale = cfg.d_model**-0.5 if cfg.tie_embeddings and cfg.rescale_tied_logits else 1.0
        self.row_weight: Tensor | None = None  # (D, V), set only within one_row_decoding

    def forward(self, h: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, V)."""
        h = h * self.scale if self.scale != 1.0 else h
        if self.row_weight is not None and h.numel() == h.shape[-1]:
            return h @ self.row_weight  # (1, D) @ (D, V)
        return self.proj(h)

    @contextmanager
    def one_row_decoding(self) -> Iterator[None]:
        """Within, a one-row input goes through a (D, V) transposed copy of the weight, made on entry, where
        that was timed faster here than F.linear's one-row kernel (it streams the weight ~3x faster on the
        AVX-512 machine it was found on); the vocabulary projection is a decoding step's largest matmul.
        Anything else (GPU, autocast, a bias, a wrapped or hooked projection) keeps F.linear.
        """
        if not plain_cpu_projection(self.proj) or not transposed_row_faster(self.proj.weight):
            yield
            return
        self.row_weight = self.proj.weight.detach().t().contiguous()  # (D, V)
        try:
            yield
        finally:
            self.row_weight = None


def transposed_row_faster(weight: Tensor) -> bool:
    """Whether one row times the (D, V) transposed copy of this (V, D) weight beats F.linear here (timed once)."""
    w = weight.detach()
    v, d = w.shape

    def calls() -> dict[str, Callable[[], object]]:
        x, w_t = torch.randn(1, d, dtype=w.dtype), w.t().contiguous()  # (1, D), (D, V)
        return {"linear": partial(F.linear, x, w), "rows": partial(torch.matmul, x, w_t)}

    return matmul_layout.CHOOSER.pick(f"row 1x{d}x{v} {w.dtype}", "linear", calls) == "rows"


def plain_cpu_projection(proj: nn.Module) -> bool:
    """Whether a projection is our unhooked, bias-free Linear with a CPU weight, outside autocast."""
    hooked = bool(proj._forward_hooks or proj._forward_pre_hooks)
    if type(proj) is not Linear or proj.bias is not None or hooked or type(proj.weight) is not nn.Parameter:
        return False
    return proj.weight.device.type == "cpu" and not torch.is_autocast_enabled("cpu")


class MaskedLMHead(nn.Module):
    """BERT's MLM head: dense + activation + norm, then a (tied) vocabulary projection with bias."""

    def __init__(self, cfg: TransformerConfig, embedding: nn.Embedding | None = None) -> None:
        super().__init__()
        self.dense, self.act, self.norm = (
            Linear(cfg.d_model, cfg.d_model),
            ACTIVATIONS[cfg.activation],
            make_norm(cfg),
        )
        self.proj = Linear(cfg.d_model, cfg.vocab_size)
        if cfg.tie_embeddings and embedding is not None:
            self.proj.weight = embedding.weight

    def forward(self, h: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, V)."""
        return self.proj(self.norm(self.act(self.dense(h))))


class ClassificationHead(nn.Module):
    """Pool a sequence, optionally through a tanh pooler, then classify.

    Pooling: `cls` reads position 0, `mean` averages the real tokens, `last` reads each row's last real
    token (found from the mask, so right- and left-padded rows both work; with no mask, the last position);
    `decoder` reads position 0 of features that are already one decoder step (see SequenceClassifier).
    """

    def __init__(
        self,
        d_model: int,
        num_classes: int,
        pooling: Pooling = "cls",
        pooler: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r}; expected one of {POOLINGS}")
        self.pooling = pooling
        self.pooler = nn.Sequential(Linear(d_model, d_model), nn.Tanh()) if pooler else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.classifier = Linear(d_model, num_classes)

    def forward(self, h: Tensor, mask: Tensor | None = None) -> Tensor:
        """(B, T, D) features and (B, T) real-token mask -> (B, num_classes) logits."""
        return self.classifier(self.dropout(self.pooler(pool(h, mask, self.pooling))))


def pool(h: Tensor, mask: Tensor | None, pooling: Pooling) -> Tensor:
    """(B, T, D) features and (B, T) real-token mask -> (B, D) one vector per row."""
    if pooling in ("cls", "decoder"):
        return h[:, 0]
    if pooling == "last":
        return h[:, -1] if mask is None else h[torch.arange(len(h), device=h.device), last_real_index(mask)]
    weights = mask.to(h.dtype)[..., None] if mask is not None else torch.ones_like(h[..., :1])  # (B, T, 1)
    return (h * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def last_real_index(mask: Tensor) -> Tensor:
    """(B, T) real-token mask -> (B,) index of each row's last real token (0 for a row with none)."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)  # (B, T)
    return torch.where(mask.bool(), positions, 0).amax(dim=1)


class TokenClassificationHead(nn.Module):
    """One label distribution per token (NER, tagging)."""

    def __init__(self, d_model: int, num_labels: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout, self.classifier = nn.Dropout(dropout), Linear(d_model, num_labels)

    def forward(self, h: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, num_labels)."""
        return self.classifier(self.dropout(h))
