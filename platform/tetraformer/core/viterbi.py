"""Constrained decoding: the best label sequence whose every step is an allowed transition (Viterbi)."""

from __future__ import annotations

import torch
from torch import Tensor

IGNORE_INDEX = -100  # the label id of positions that are not decoded


def constrained_decode(scores: Tensor, mask: Tensor, trans: Tensor, start: Tensor, end: Tensor) -> Tensor:
    """(B, W) best label ids under the allowed transitions; IGNORE_INDEX where `mask` is False.

    scores (B, W, L): per-position label scores (log-probs or logits; a sequence scores their sum).
    mask (B, W) bool: the positions to decode; each row's True positions, in order, are one sequence, so
    the mask may be a prefix or have holes (a hole is skipped: the labels on both sides of it must connect).
    trans (L, L) bool [from, to], start (L,) bool, end (L,) bool: the allowed transitions, first and last labels;
    or float scores of them (a CRF's, -inf where not allowed), added to the sequence's score.
    A row with no allowed sequence at all gets arbitrary labels; a row with no True position gets none.
    """
    b, w, n = scores.shape
    scores = scores.float()
    trans_score, start_score, end_score = (_as_scores(t, scores.device) for t in (trans, start, end))
    mask = mask.bool()
    stay = torch.arange(n, device=scores.device).expand(b, n)  # (B, L): the backpointer of a skipped position
    alpha = torch.zeros(b, n, device=scores.device)  # (B, L) best score of a sequence ending in each label
    started = torch.zeros(b, 1, dtype=torch.bool, device=scores.device)  # (B, 1) a real position was seen
    pointers = []
    for t in range(w):
        best, arg = (alpha.unsqueeze(2) + trans_score).max(dim=1)  # (B, L_to) over L_from
        step = torch.where(started, best, start_score) + scores[:, t]  # (B, L)
        active = mask[:, t : t + 1]  # (B, 1)
        alpha = torch.where(active, step, alpha)
        pointers.append(torch.where(active & started, arg, stay))  # (B, L)
        started = started | active
    last = (alpha + end_score).argmax(dim=1)  # (B,)
    labels = torch.empty(b, w, dtype=torch.long, device=scores.device)
    for t in range(w - 1, -1, -1):
        labels[:, t] = last
        last = pointers[t].gather(1, last.unsqueeze(1)).squeeze(1)  # (B,)
    return labels.masked_fill(~mask, IGNORE_INDEX)


def _as_scores(allowed: Tensor, device: torch.device) -> Tensor:
    """Float scores of transitions as given, or 0 where a bool tensor allows one and -inf where it does not."""
    if allowed.dtype != torch.bool:
        return allowed.to(device).float()
    return torch.where(allowed.to(device), 0.0, torch.tensor(float("-inf"), device=device))


def chain_marginals(scores: Tensor, mask: Tensor, trans: Tensor, start: Tensor, end: Tensor) -> Tensor:
    """(B, W, L) each position's label probabilities over the sequences `constrained_decode` chooses among (the
    same arguments; forward-backward), 0 where `mask` is False."""
    b, w, n = scores.shape
    scores = scores.float()
    blocked = torch.finfo(torch.float32).min / 4  # stands for -inf: finite, so no position gets inf - inf
    trans_score, start_score, end_score = (_as_scores(t, scores.device).clamp(min=blocked) for t in (trans, start, end))
    mask = mask.bool()
    alpha = torch.zeros(b, n, device=scores.device)  # (B, L) log-sum of the sequences so far ending in each label
    started = torch.zeros(b, 1, dtype=torch.bool, device=scores.device)  # (B, 1)
    forward = []
    for t in range(w):
        moved = torch.logsumexp(alpha.unsqueeze(2) + trans_score, dim=1)  # (B, L_to) over L_from
        step = torch.where(started, moved, start_score) + scores[:, t]  # (B, L)
        active = mask[:, t : t + 1]  # (B, 1)
        alpha = torch.where(active, step, alpha)
        started = started | active
        forward.append(alpha)
    log_z = torch.logsumexp(alpha + end_score, dim=1, keepdim=True)  # (B, 1)
    beta = end_score.expand(b, n)  # (B, L) log-sum of the ways to finish after a label at the next real position
    marginals = torch.zeros(b, w, n, device=scores.device)
    for t in range(w - 1, -1, -1):
        active = mask[:, t : t + 1]  # (B, 1)
        marginals[:, t] = torch.where(active, (forward[t] + beta - log_z).exp(), 0.0)
        before = torch.logsumexp(trans_score + (scores[:, t] + beta).unsqueeze(1), dim=2)  # (B, L_from) over L_to
        beta = torch.where(active, before, beta)
    return marginals
