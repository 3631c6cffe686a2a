"""Task heads that sit on a backbone's features: LM, masked LM, sequence and token classification."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tetraformer.core.config import TransformerConfig
from tetraformer.core.layers import ACTIVATIONS, make_norm
from tetraformer.core.linear import Linear


class LMHead(nn.Module):
    """Hidden states -> vocabulary logits, optionally sharing the token embedding matrix."""

    def __init__(self, cfg: TransformerConfig, embedding: nn.Embedding | None = None) -> None:
        super().__init__()
        self.proj = Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings and embedding is not None:
            self.proj.weight = embedding.weight
        self.scale = cfg.d_model**-0.5 if cfg.tie_embeddings and cfg.rescale_tied_logits else 1.0

    def forward(self, h: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, V)."""
        return self.proj(h * self.scale if self.scale != 1.0 else h)


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
    """Pool a sequence ([CLS] or mean over real tokens), optionally through a tanh pooler, then classify."""

    def __init__(
        self, d_model: int, num_classes: int, pooling: str = "cls", pooler: bool = False, dropout: float = 0.0
    ) -> None:
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling={pooling!r}; expected 'cls' or 'mean'")
        self.pooling = pooling
        self.pooler = nn.Sequential(Linear(d_model, d_model), nn.Tanh()) if pooler else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.classifier = Linear(d_model, num_classes)

    def forward(self, h: Tensor, mask: Tensor | None = None) -> Tensor:
        """(B, T, D) features and (B, T) real-token mask -> (B, num_classes) logits."""
        if self.pooling == "cls":
            pooled = h[:, 0]
        else:
            weights = mask.to(h.dtype)[..., None] if mask is not None else torch.ones_like(h[..., :1])
            pooled = (h * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # (B, D)
        return self.classifier(self.dropout(self.pooler(pooled)))


class TokenClassificationHead(nn.Module):
    """One label distribution per token (NER, tagging)."""

    def __init__(self, d_model: int, num_labels: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout, self.classifier = nn.Dropout(dropout), Linear(d_model, num_labels)

    def forward(self, h: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, num_labels)."""
        return self.classifier(self.dropout(h))
