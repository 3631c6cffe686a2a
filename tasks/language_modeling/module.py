"""LightningModule for causal language modelling: next-token loss, perplexity, generated samples."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn
from torchmetrics import Metric

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.data.spec import DataSpec
from tetraformer.errors import require
from tetraformer.training.base.module import TaskModule
from tetraformer.training.base.predictions import GENERATED
from tetraformer.training.base.text_generation import GeneratesText, TextGenerationConfig
from tetraformer.training.metrics.stages import TokenPerplexity


class LanguageModeling(GeneratesText, TaskModule):
    """Trains a GPT on packed blocks of text; samples from fixed prompts at each validation.

    The TaskModule options (arch, optim, init_from, label_smoothing) pass through `**kwargs`.
    """

    hf_architectures = (
        "GPT2LMHeadModel",
        "GPT2Model",
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
    )

    def __init__(
        self,
        sample_prompts: list[str] | None = None,
        generation: TextGenerationConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if self.init_from is None and isinstance(self.arch, TransformerConfig):  # else make_network checks it
            decoder_only(self.arch)
        self.save_hyperparameters()
        self.sample_prompts = sample_prompts if sample_prompts is not None else ["The "]
        self.generation = generation or TextGenerationConfig()

    def network_config(self, spec: DataSpec) -> TransformerConfig:
        """The architecture with the tokenizer's vocabulary and a table long enough for the blocks."""
        return self.arch.replace(vocab_size=spec.vocab_size, max_len=max(self.arch.max_len, spec.max_length))

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A GPT: the core's decoder-only CausalLM (every position type; T5's relative buckets are causal here)."""
        decoder_only(cfg)
        return CausalLM(cfg)

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Next-token cross-entropy over a (B, T+1) block; its mean NLL and targets feed the perplexity."""
        blocks = batch["input_ids"]  # (B, T + 1)
        logits = self.net(blocks[:, :-1])  # (B, T, V)
        targets = blocks[:, 1:]  # (B, T)
        loss = self.cross_entropy(logits, targets)
        return {"loss": loss, "preds": loss.detach(), "targets": targets}

    def make_metrics(self) -> dict[str, Metric]:
        """Perplexity: exp of the token-weighted mean NLL (of the step in training, else of the epoch)."""
        return {"ppl": TokenPerplexity()}

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Tokens fed to the model."""
        return batch["input_ids"][:, :-1].numel()

    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, str]]:
        """Continue each prompt of the batch."""
        outputs = self.generate(batch["prompts"])
        return [{"prompt": p, GENERATED: o} for p, o in zip(batch["prompts"], outputs, strict=True)]


def decoder_only(cfg: TransformerConfig) -> None:
    """A GPT has no encoder: an OptionError for a config with decoder layers of an encoder-decoder."""
    layers = cfg.n_decoder_layers
    require(cfg, "n_decoder_layers", layers, layers == 0, "must be 0: a language model is decoder-only (GPT)")
