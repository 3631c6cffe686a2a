"""LightningModule for causal language modelling: next-token loss, perplexity, generated samples."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from tasks.language_modeling.model import build_gpt
from tetraformer.core import TransformerConfig
from tetraformer.training.module import TaskModule
from tetraformer.training.optim import OptimizerConfig
from tetraformer.training.text_generation import TextGenerationConfig, generate_text


class LanguageModeling(TaskModule):
    """Trains a GPT on packed blocks of text; samples from fixed prompts at each validation."""

    def __init__(
        self,
        arch: TransformerConfig | None = None,
        optim: OptimizerConfig | None = None,
        init_from: str | None = None,
        label_smoothing: float = 0.0,
        sample_prompts: list[str] | None = None,
        generation: TextGenerationConfig | None = None,
    ) -> None:
        super().__init__(arch, optim, init_from, label_smoothing)
        self.save_hyperparameters()
        self.sample_prompts = sample_prompts if sample_prompts is not None else ["The "]
        self.generation = generation or TextGenerationConfig()

    def network_config(self, datamodule: Any) -> TransformerConfig:
        """The architecture with the tokenizer's vocabulary and a table long enough for the blocks."""
        max_len = max(self.arch.max_len, getattr(datamodule, "block_size", 0))
        return self.arch.replace(vocab_size=len(datamodule.tokenizer), max_len=max_len)

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A GPT."""
        return build_gpt(cfg)

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Next-token cross-entropy and perplexity over a (B, T+1) block of tokens."""
        blocks = batch["input_ids"]  # (B, T + 1)
        logits = self.net(blocks[:, :-1])  # (B, T, V)
        loss = self.cross_entropy(logits, blocks[:, 1:])
        return {"loss": loss, "ppl": torch.exp(loss.detach().clamp(max=20.0))}

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Tokens fed to the model."""
        return batch["input_ids"][:, :-1].numel()

    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, str]]:
        """Continue each prompt of the batch."""
        outputs = self.generate(batch["prompts"])
        return [{"prompt": p, "generated": o} for p, o in zip(batch["prompts"], outputs, strict=True)]

    def generate(
        self, prompts: list[str], config: TextGenerationConfig | None = None, on_text: Any = None
    ) -> list[str]:
        """Generated continuations (prompt excluded) of a batch of text prompts."""
        was_training = self.training
        self.eval()
        try:
            return generate_text(self.net, self.tokenizer, prompts, config or self.generation, on_text)
        finally:
            self.train(was_training)
