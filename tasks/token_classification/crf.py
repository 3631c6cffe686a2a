"""A linear-chain CRF over word tags: learned start, transition and end scores on top of the tagger's emissions."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class TagTransitions(nn.Module):
    """Learned scores of a tag sequence's first tag (`start`), each step from one tag to the next (`trans`,
    [from, to]) and its last tag (`end`); a sequence scores these plus its emissions."""

    def __init__(self, num_tags: int) -> None:
        super().__init__()
        self.start = nn.Parameter(torch.zeros(num_tags))  # (L,)
        self.trans = nn.Parameter(torch.zeros(num_tags, num_tags))  # (L, L)
        self.end = nn.Parameter(torch.zeros(num_tags))  # (L,)

    def negative_log_likelihood(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """(S,) -log p(tags) of each sentence: emissions (S, W, L), tags (S, W) (any id off the mask), mask (S, W).

        A sentence's masked positions, in order, are its sequence; a position off the mask is skipped.
        """
        return self.log_partition(emissions, mask) - self.sequence_score(emissions, tags, mask)

    def sequence_score(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """(S,) score of the given tags: start + emissions + transitions between consecutive masked positions + end."""
        s, w, _ = emissions.shape
        tags = tags.clamp(min=0)  # (S, W): ids off the mask are never read
        score = emissions.new_zeros(s)  # (S,)
        previous = torch.zeros(s, dtype=torch.long, device=emissions.device)  # (S,) last masked tag so far
        started = torch.zeros(s, dtype=torch.bool, device=emissions.device)  # (S,)
        for t in range(w):
            active, tag = mask[:, t], tags[:, t]  # (S,), (S,)
            step = emissions[:, t].gather(1, tag[:, None]).squeeze(1)  # (S,)
            step = step + torch.where(started, self.trans[previous, tag], self.start[tag])
            score = score + torch.where(active, step, torch.zeros_like(step))
            previous = torch.where(active, tag, previous)
            started = started | active
        return score + torch.where(started, self.end[previous], torch.zeros_like(score))

    def log_partition(self, emissions: Tensor, mask: Tensor) -> Tensor:
        """(S,) log of the summed exp-scores of every tag sequence over each sentence's masked positions."""
        s, w, n = emissions.shape
        alpha = emissions.new_zeros(s, n)  # (S, L) log-sum of sequences ending in each tag
        started = torch.zeros(s, 1, dtype=torch.bool, device=emissions.device)  # (S, 1)
        for t in range(w):
            moved = torch.logsumexp(alpha.unsqueeze(2) + self.trans, dim=1)  # (S, L_to) over L_from
            step = torch.where(started, moved, self.start.expand(s, n)) + emissions[:, t]  # (S, L)
            active = mask[:, t : t + 1]  # (S, 1)
            alpha = torch.where(active, step, alpha)
            started = started | active
        total = torch.logsumexp(alpha + self.end, dim=1)  # (S,)
        return torch.where(started.squeeze(1), total, torch.zeros_like(total))

    def decode_scores(self, allowed: tuple[Tensor, Tensor, Tensor] | None) -> tuple[Tensor, Tensor, Tensor]:
        """(start, trans, end) for Viterbi: the learned scores, -inf where `allowed` (bool, the same shapes) says no."""
        learned = (self.start, self.trans, self.end)
        if allowed is None:
            return tuple(t.detach().float() for t in learned)
        blocked = torch.tensor(float("-inf"), device=self.trans.device)
        return tuple(
            torch.where(a.to(t.device), t.detach().float(), blocked) for t, a in zip(learned, allowed, strict=True)
        )
