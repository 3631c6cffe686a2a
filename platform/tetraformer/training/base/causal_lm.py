"""CausalLMTask: the TaskModule of a GPT that generates text (language modelling and instruction tuning share it)."""

from __future__ import annotations

from typing import Any

from torch import nn
from torchmetrics import Metric

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.data.spec import DataSpec
from tetraformer.errors import require
from tetraformer.training.base.module import TaskModule
from tetraformer.training.base.predictions import GENERATED
from tetraformer.training.base.text_generation import GeneratesText, TextGenerationConfig
from tetraformer.training.metrics.stages import TokenPerplexity


class CausalLMTask(GeneratesText, TaskModule):
    """The core's decoder-only CausalLM sized to the data's tokenizer, token perplexity, samples from
    `sample_prompts` at each validation, `generate` with `generation`'s settings, predict continuing prompts.

    A task adds its loss (`compute`) and what it feeds (`batch_tokens`); the TaskModule options (arch, optim,
    init_from, label_smoothing) pass through `**kwargs`.
    """

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
        """The architecture with the tokenizer's vocabulary and a table long enough for the data's sequences."""
        return self.arch.replace(vocab_size=spec.vocab_size, max_len=max(self.arch.max_len, spec.max_length))

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A GPT: the core's decoder-only CausalLM (every position type; T5's relative buckets are causal here)."""
        decoder_only(cfg)
        return CausalLM(cfg)

    def make_metrics(self) -> dict[str, Metric]:
        """Perplexity: exp of the token-weighted mean NLL (of the step in training, else of the epoch)."""
        return {"ppl": TokenPerplexity()}

    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, str]]:
        """Continue each prompt of the batch."""
        outputs = self.generate(batch["prompts"])
        return [{"prompt": p, GENERATED: o} for p, o in zip(batch["prompts"], outputs, strict=True)]


def decoder_only(cfg: TransformerConfig) -> None:
    """A GPT has no encoder: an OptionError for a config with decoder layers of an encoder-decoder."""
    layers = cfg.n_decoder_layers
    require(cfg, "n_decoder_layers", layers, layers == 0, "must be 0: a language model is decoder-only (GPT)")
