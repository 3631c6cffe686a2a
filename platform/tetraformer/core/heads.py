"""Task heads that sit on a backbone's features: LM, masked LM, sequence and token classification."""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor, nn

from tetraformer.core.config import TransformerConfig
from tetraformer.core.layers import ACTIVATIONS, make_norm

Pooling = Literal["cls", "mean", "last", "decoder"]  # decoder: a one-step decoder state (encoder-decoder)
POOLINGS: tuple[str, ...] = get_args(Pooling)


class LMHead(nn.Module):
    """Hidden states -> vocabulary logits, optionally sharing the token embedding matrix."""

    def __init__(self, cfg: TransformerConfig, embedding: nn.Embedding | None = None) -> None:
        super().__init__()
        self.proj = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings and embedding is not None:
            self.proj.weight = embedding.weight
        self.scale = cfg.d_model**-0.5 if cfg.tie_embeddings and cfg.rescale_tied_logits else 1.0

    def forward(self, h: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, V)."""
        h = h * self.scale if self.scale != 1.0 else h
        return self.proj(h)


class MaskedLMHead(nn.Module):
    """BERT's MLM head: dense + activation + norm, then a (tied) vocabulary projection with bias."""

    def __init__(self, cfg: TransformerConfig, embedding: nn.Embedding | None = None) -> None:
        super().__init__()
        self.dense, self.act, self.norm = (
            nn.Linear(cfg.d_model, cfg.d_model),
            ACTIVATIONS[cfg.activation],
            make_norm(cfg),
        )
        self.proj = nn.Linear(cfg.d_model, cfg.vocab_size)
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
        self.pooler = nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh()) if pooler else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, num_classes)

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
        self.dropout, self.classifier = nn.Dropout(dropout), nn.Linear(d_model, num_labels)

    def forward(self, h: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, num_labels)."""
        return self.classifier(self.dropout(h))
