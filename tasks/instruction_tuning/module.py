"""LightningModule for instruction tuning: the language model's network, loss on assistant tokens, chat generation."""

from __future__ import annotations

from torch import Tensor

from tetraformer.training.base.chat_lm import ChatLMTask


class InstructionTuning(ChatLMTask):
    """A GPT (ChatLMTask's network, init_from, chat template and generation, as language modelling's) trained on
    chats: next-token loss on assistant tokens only, padded or packed batches (position_ids and document_ids keep
    packed examples apart).

    A prompt (`generate`, validation samples, predict) is one user turn; generation stops at the end-of-turn token.
    sample_prompts defaults to the first validation conversations' last user turns.
    """

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Cross-entropy over the assistant tokens' labels (others are IGNORE_INDEX); it feeds the perplexity."""
        labels = batch["labels"]  # (B, T), already shifted: labels[t] follows input_ids[t]
        loss = self.lm_loss(
            labels, batch["input_ids"], position_ids=batch.get("position_ids"), document_ids=batch.get("document_ids")
        )
        return {"loss": loss, "preds": loss.detach(), "targets": labels}

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Real tokens fed to the model: not a padded batch's padding (its attention_mask), nor a packed row's
        (document -1)."""
        if "document_ids" in batch:
            return int((batch["document_ids"] >= 0).sum())
        return int(batch["attention_mask"].sum())
