"""LightningModule for preference tuning: a chat model trained on {prompt, chosen, rejected} pairs (DPO, IPO, SimPO)."""

from __future__ import annotations

import copy
import logging
from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor, nn
from torchmetrics import Metric

from tasks.preference_tuning.losses import REFERENCED, LossKind, Replies, preference_losses
from tetraformer.core.lora import lora_disabled, lora_layers
from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.errors import ConfigError, above, at_least, require
from tetraformer.training.base.chat_lm import ChatLMTask

log = logging.getLogger(__name__)


class PreferenceTuning(ChatLMTask):
    """A chat model (ChatLMTask: init_from, chat template, `generate --chat`) tuned to prefer each pair's chosen reply
    over its rejected one.

    `loss`: `dpo` (sigmoid; `label_smoothing` is cDPO's share of flipped pairs), `ipo` (squared, on per-token
    log-ratios) or `simpo` (reference-free, on per-token log-probabilities, with the target margin `gamma`); `beta`
    scales each. The reference of DPO and IPO is the starting weights (`init_from`, which preference tuning needs):
    with LoRA, the same network with its adapters off (`lora_disabled`: no second copy); without LoRA, a frozen copy
    of the network as it starts, outside the module's state (never in a checkpoint), which holds a second copy of the
    weights in memory. Its log-probabilities are computed in eval mode under no_grad, beside the policy's.

    Per step and per validation it logs the loss, the chosen and rejected replies' mean rewards, their margin, the
    reward accuracy (the share of pairs whose chosen reward is higher) and the preference accuracy (the share whose
    chosen reply the policy gives a higher log-probability: at the start, the model's own preference).
    """

    def __init__(
        self,
        loss: LossKind = "dpo",
        beta: float = 0.1,
        gamma: float = 0.0,
        sample_prompts: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(sample_prompts=sample_prompts, **kwargs)
        require(self, "loss", loss, loss in ("dpo", "ipo", "simpo"), "must be one of dpo, ipo, simpo")
        above(self, 0, beta=beta)
        at_least(self, 0, gamma=gamma)
        require(self, "gamma", gamma, gamma == 0 or loss == "simpo", "is SimPO's margin: set --model.loss simpo")
        smooth = self.label_smoothing
        require(self, "label_smoothing", smooth, smooth < 0.5, "must be less than 0.5 (the share of flipped pairs)")
        require(self, "label_smoothing", smooth, smooth == 0 or loss != "ipo", "does not apply to the ipo loss")
        if not self.init_from:
            raise ConfigError(
                "preference tuning starts from a chat model: set --model.init_from to an instruction-tuning "
                "checkpoint or a Hugging Face folder (its weights are also the reference of dpo and ipo)"
            )
        self.loss_kind, self.beta, self.gamma = loss, beta, gamma
        self._reference: list[nn.Module] = []  # a frozen copy of the start, kept out of the module's state

    def make_metrics(self) -> dict[str, Metric]:
        """None: the rewards and accuracies are logged from `compute`, weighted by each batch's pairs."""
        return {}

    def configure_model(self) -> None:
        """Build the network; without LoRA, a loss that needs the reference keeps a frozen copy of it as it starts
        (before a checkpoint being resumed loads its weights)."""
        fresh = self.net is None
        super().configure_model()
        if fresh and self.net is not None and self.loss_kind in REFERENCED and not self._adapted():
            self._reference = [copy.deepcopy(self.net).requires_grad_(False).eval()]

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """The batch's mean loss and what it implies: rewards, their margin, reward and preference accuracy."""
        policy = self.reply_logps(self.net, batch)
        reference = self.reference_logps(batch) if self.loss_kind in REFERENCED else None
        smoothing = self.label_smoothing if self.training else 0.0
        pairs = preference_losses(self.loss_kind, policy, reference, self.beta, smoothing, self.gamma)
        chosen, rejected = pairs.chosen_rewards, pairs.rejected_rewards  # (B,) each
        return {
            "loss": pairs.loss.mean(),
            "rewards_chosen": chosen.mean(),
            "rewards_rejected": rejected.mean(),
            "reward_margin": (chosen - rejected).mean(),
            "reward_accuracy": (chosen > rejected).float().mean(),
            "preference_accuracy": (policy.chosen > policy.rejected).float().mean().detach(),
        }

    def reply_logps(self, net: nn.Module, batch: dict[str, Tensor]) -> Replies:
        """The replies' summed token log-probabilities under `net`: the batch's first half of rows are the chosen
        replies, the second the rejected ones (data/preference.py's PairedExamples)."""
        labels = batch["labels"]  # (2B, T), shifted: labels[t] follows input_ids[t]
        learned = labels != IGNORE_INDEX  # (2B, T)
        if self._trainer is not None and "FSDP" in type(self.trainer.strategy).__name__:
            logits = net(batch["input_ids"])[learned]  # a sharded network computes its logits in one call
        else:
            logits = net.lm_head(net(batch["input_ids"], features_only=True)[learned])  # (N, V): reply tokens only
        tokens = logits.float().log_softmax(-1).gather(-1, labels[learned][:, None]).squeeze(-1)  # (N,)
        rows = learned.nonzero()[:, 0]  # (N,) the row of each reply token
        sums = torch.zeros(len(labels), device=tokens.device, dtype=tokens.dtype).index_add(0, rows, tokens)
        counts = learned.sum(-1)  # (2B,)
        chosen, rejected = sums.chunk(2)
        chosen_tokens, rejected_tokens = counts.chunk(2)
        return Replies(chosen, rejected, chosen_tokens, rejected_tokens)

    @torch.no_grad()
    def reference_logps(self, batch: dict[str, Tensor]) -> Replies:
        """The replies' log-probabilities under the starting weights, in eval mode (no dropout)."""
        net, off = self.reference_network()
        training = net.training
        net.eval()
        try:
            with off:
                return self.reply_logps(net, batch)
        finally:
            net.train(training)

    def reference_network(self) -> tuple[nn.Module, Any]:
        """The network that gives the reference and the context it runs in: the adapted network with its adapters
        off, else the frozen copy (built from init_from when a checkpoint was loaded without one), on the policy's
        device and dtype."""
        if self._adapted():
            return self.net, lora_disabled(self.net)
        if not self._reference:
            self._reference = [self.base_network(self.net.cfg, self.init_from).requires_grad_(False).eval()]
        weight = next(self.net.parameters())
        self._reference[0].to(device=weight.device, dtype=weight.dtype)
        return self._reference[0], nullcontext()

    def _adapted(self) -> bool:
        """Whether the network carries LoRA adapters."""
        return any(True for _ in lora_layers(self.net))

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Real tokens fed to the model: both replies' rows without their padding."""
        return int(batch["attention_mask"].sum())
