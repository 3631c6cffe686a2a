"""LightningModule for causal language modelling: next-token loss, perplexity, generated samples."""

from __future__ import annotations

from torch import Tensor

from tetraformer.training.base.causal_lm import CausalLMTask


class LanguageModeling(CausalLMTask):
    """Trains a GPT on packed blocks of text; samples from fixed prompts at each validation.

    The network, metrics, sampling and generation are CausalLMTask's (training/base/causal_lm.py); its options
    (sample_prompts, generation) and the TaskModule's (arch, optim, init_from, label_smoothing) pass through.
    """

    hf_architectures = (
        "GPT2LMHeadModel",
        "GPT2Model",
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
    )

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Next-token cross-entropy over a (B, T+1) block; its mean NLL and targets feed the perplexity."""
        blocks = batch["input_ids"]  # (B, T + 1)
        targets = blocks[:, 1:]  # (B, T)
        loss = self.lm_loss(targets, blocks[:, :-1])
        return {"loss": loss, "preds": loss.detach(), "targets": targets}

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Tokens fed to the model."""
        return batch["input_ids"][:, :-1].numel()

    def row_tokens(self) -> int | None:
        """Every block feeds the model block_size tokens (the spec's max_length)."""
        return self.spec.max_length if self.spec is not None and self.spec.max_length else None
