"""The preference losses (DPO, IPO, SimPO) of a batch of pairs, from the replies' log-probabilities, with the rewards
they imply.

Each takes per-pair sums of the reply tokens' log-probabilities under the policy (and, for DPO and IPO, under the
reference) and their token counts, and returns per-pair losses and rewards, as TRL 1.x computes them (tested
against it): DPO's sigmoid loss with cDPO's label smoothing, IPO on per-token log-ratios (TRL's normalisation, agreed
with the IPO authors), SimPO on per-token log-probabilities (TRL's CPO trainer, loss_type simpo, no SFT term).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch.nn.functional as F
from torch import Tensor

LossKind = Literal["dpo", "ipo", "simpo"]
REFERENCED: tuple[str, ...] = ("dpo", "ipo")  # the losses that compare the policy with the reference


@dataclass(frozen=True)
class Replies:
    """Per pair: the chosen and the rejected reply's summed token log-probabilities and token counts, each (B,)."""

    chosen: Tensor
    rejected: Tensor
    chosen_tokens: Tensor
    rejected_tokens: Tensor

    def __sub__(self, other: Replies) -> Replies:
        """The log-ratios of these log-probabilities over `other`'s (the reference's), with the same counts."""
        return Replies(
            self.chosen - other.chosen, self.rejected - other.rejected, self.chosen_tokens, self.rejected_tokens
        )

    def per_token(self) -> tuple[Tensor, Tensor]:
        """(B,) chosen and (B,) rejected values divided by their token counts."""
        return self.chosen / self.chosen_tokens.clamp(min=1), self.rejected / self.rejected_tokens.clamp(min=1)


@dataclass(frozen=True)
class PairLosses:
    """Per pair, each (B,): the loss, and the chosen and rejected replies' rewards."""

    loss: Tensor
    chosen_rewards: Tensor
    rejected_rewards: Tensor


def preference_losses(
    kind: LossKind, policy: Replies, reference: Replies | None, beta: float, smoothing: float = 0.0, gamma: float = 0.0
) -> PairLosses:
    """The `kind` loss of each pair; `reference` is needed by DPO and IPO (None for SimPO)."""
    if kind == "simpo":
        chosen, rejected = policy.per_token()
        loss = smoothed_sigmoid(beta * (chosen - rejected) - gamma, smoothing)
        return PairLosses(loss, beta * chosen.detach(), beta * rejected.detach())
    if reference is None:
        raise ValueError(f"the {kind} loss needs the reference's log-probabilities")
    ratios = policy - reference
    rewards = beta * ratios.chosen.detach(), beta * ratios.rejected.detach()
    if kind == "dpo":
        return PairLosses(smoothed_sigmoid(beta * (ratios.chosen - ratios.rejected), smoothing), *rewards)
    chosen, rejected = ratios.per_token()
    return PairLosses((chosen - rejected - 1 / (2 * beta)) ** 2, *rewards)


def smoothed_sigmoid(logits: Tensor, smoothing: float) -> Tensor:
    """-log sigmoid(logits), with a `smoothing` share of the pairs taken as flipped (cDPO's label smoothing)."""
    return -(1 - smoothing) * F.logsigmoid(logits) - smoothing * F.logsigmoid(-logits)
