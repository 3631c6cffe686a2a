"""LightningModule for sequence-to-sequence: teacher-forced loss, validation by generation, BLEU/chrF/ROUGE."""

from __future__ import annotations

from typing import Any, Literal

from torch import Tensor, nn

from tetraformer.core import Seq2SeqLM, TransformerConfig
from tetraformer.core.accounting import TokenCost, token_cost
from tetraformer.data.spec import DataSpec
from tetraformer.errors import at_least, require
from tetraformer.training.base.module import TaskModule
from tetraformer.training.base.predictions import GENERATED
from tetraformer.training.base.text_generation import GeneratesText, TextGenerationConfig
from tetraformer.training.metrics.generation import generation_metrics
from tetraformer.training.reports.loggers import wandb_logger

GenerationMetric = Literal["bleu", "chrf", "rouge1", "rouge2", "rougeL"]
GENERATION_STAGES = ("val", "test")
TABLE_COLUMNS = ["step", "source", "reference", "hypothesis"]


def default_generation() -> TextGenerationConfig:
    """Beam search (4 beams, no sampling): the decoding that validation and `generate` use unless configured."""
    return TextGenerationConfig(max_new_tokens=64, do_sample=False, num_beams=4)


class Seq2Seq(GeneratesText, TaskModule):
    """Trains an encoder-decoder on (source, target) pairs; validates by generating on a few batches.

    The loss is teacher-forced cross-entropy over the target tokens (padding ignored). On the first
    `val_generate_batches` validation batches (every test batch) the model decodes the sources with `generation`
    and the `metrics` (sacreBLEU BLEU / chrF, ROUGE) score the outputs against the targets, logged as val/bleu etc.
    The TaskModule options (arch, optim, init_from, label_smoothing) pass through `**kwargs`.
    """

    hf_architectures = ("T5ForConditionalGeneration",)
    token_unit = "source + target tokens"

    def __init__(
        self,
        generation: TextGenerationConfig | None = None,
        metrics: list[GenerationMetric] | None = None,
        val_generate_batches: int = 4,
        table_rows: int = 16,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        at_least(self, 0, val_generate_batches=val_generate_batches, table_rows=table_rows)
        if self.init_from is None and isinstance(self.arch, TransformerConfig):  # else make_network checks it
            encoder_decoder(self.arch)
        self.save_hyperparameters()
        if isinstance(generation, dict):  # hyper-parameters of a checkpoint saved outside the CLI are plain data
            generation = TextGenerationConfig(**generation)
        self.generation = generation or default_generation()
        self.metric_names = list(metrics) if metrics is not None else ["bleu", "chrf"]
        self.val_generate_batches, self.table_rows = val_generate_batches, table_rows
        self.sample_prompts: list[str] = []  # the validation table shows sources, references and outputs instead
        self.generation_scores: nn.ModuleDict | None = None
        self.table: list[list[Any]] = []

    # --- network -------------------------------------------------------------------------------------
    @property
    def source_prefix(self) -> str:
        """The data's task prefix, put before `generate` prompts that lack it."""
        return (self.spec.extras.get("source_prefix") if self.spec is not None else None) or ""

    def network_config(self, spec: DataSpec) -> TransformerConfig:
        """The architecture with the tokenizer's vocabulary and a position table long enough for the data."""
        return self.arch.replace(vocab_size=spec.vocab_size, max_len=max(self.arch.max_len, spec.max_length))

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A Seq2SeqLM: the core's encoder-decoder family, checked to have a decoder."""
        encoder_decoder(cfg)
        return Seq2SeqLM(cfg)

    # --- loss ----------------------------------------------------------------------------------------
    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Teacher-forced cross-entropy over the (B, T) labels; -100 (padding) is ignored."""
        inputs = (batch["input_ids"], batch["decoder_input_ids"], batch["attention_mask"])
        return {"loss": self.lm_loss(batch["labels"], *inputs, batch["decoder_attention_mask"])}

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Real source and target tokens."""
        return int(batch["attention_mask"].sum() + batch["decoder_attention_mask"].sum())

    def flop_costs(self, net: nn.Module) -> dict[str, TokenCost]:
        """A source token passes the encoder; a target token the decoder (its cross-attention too) and the LM head."""
        return {
            "source": token_cost(net, exclude=("decoder", "lm_head")),
            "target": token_cost(net, exclude=("encoder",)),
        }

    def batch_flops(self, batch: dict[str, Tensor], costs: dict[str, TokenCost]) -> float:
        """Source tokens through the encoder, target tokens through the decoder over the source (mean lengths)."""
        rows = batch["input_ids"].shape[0]
        source, target = int(batch["attention_mask"].sum()), int(batch["decoder_attention_mask"].sum())
        return costs["source"].flops(source, source / rows) + costs["target"].flops(
            target, target / rows, source / rows
        )

    # --- generation metrics --------------------------------------------------------------------------
    def on_fit_start(self) -> None:
        """Build the generation metrics too."""
        super().on_fit_start()
        self._build_generation_metrics()

    def on_validation_start(self) -> None:
        """Build the generation metrics when validating alone."""
        super().on_validation_start()
        self._build_generation_metrics()

    def on_test_start(self) -> None:
        """Build the generation metrics when testing alone."""
        super().on_test_start()
        self._build_generation_metrics()

    def _build_generation_metrics(self) -> None:
        """Once: the configured generation metrics for validation and test."""
        if self.generation_scores is None:
            stages = {s: nn.ModuleDict(generation_metrics(self.metric_names)) for s in GENERATION_STAGES}
            self.generation_scores = nn.ModuleDict(stages).to(self.device)

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> Tensor:
        """Teacher-forced loss; on the first `val_generate_batches` batches, decoding and its metrics."""
        loss = super().validation_step(batch, batch_idx)
        has_texts = "source" in batch  # span-corruption batches have none: their score is the loss
        if has_texts and (self.val_generate_batches < 0 or batch_idx < self.val_generate_batches):
            self._score(batch, "val")
        return loss

    def test_step(self, batch: dict[str, Any], batch_idx: int) -> Tensor:
        """Teacher-forced loss, then decoding and its metrics on every batch."""
        loss = super().test_step(batch, batch_idx)
        if "source" in batch:
            self._score(batch, "test")
        return loss

    def _score(self, batch: dict[str, Any], stage: str) -> None:
        """Decode the batch's sources, update and log the stage's generation metrics; keep rows for the table."""
        hypotheses = self.generate(batch["source"])
        for name, metric in self.generation_scores[stage].items():
            metric.update(hypotheses, batch["target"])
            self.log(
                f"{stage}/{name}",
                metric,
                on_step=False,
                on_epoch=True,
                batch_size=len(hypotheses),
                metric_attribute=f"generation_scores.{stage}.{name}",
            )
        room = self.table_rows - len(self.table)
        rows = zip(batch["source"], batch["target"], hypotheses, strict=True)
        self.table += [[self.global_step, *row] for row in list(rows)[: max(room, 0)]]

    def on_validation_epoch_start(self) -> None:
        """Start a fresh table of examples."""
        self.table = []

    def on_validation_epoch_end(self) -> None:
        """Reports, then the table of source / reference / hypothesis to W&B (rank zero)."""
        super().on_validation_epoch_end()
        logger = wandb_logger(self.loggers)
        if self.table and logger is not None and self.trainer.is_global_zero and not self.trainer.sanity_checking:
            logger.log_text(key="val/translations", columns=TABLE_COLUMNS, data=self.table)

    # --- generation ----------------------------------------------------------------------------------
    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, Any]]:
        """Each input record with its generated output under "generated"."""
        outputs = self.generate(batch["source"])
        return [{**record, GENERATED: o} for record, o in zip(batch["record"], outputs, strict=True)]

    def generation_inputs(self, prompts: list[str]) -> list[str]:
        """Each source with the training data's prefix put before it where it lacks it."""
        prefix = self.source_prefix
        return [p if p.startswith(prefix) else prefix + p for p in prompts]


def encoder_decoder(cfg: TransformerConfig) -> None:
    """Seq2seq needs a decoder that reads the encoder: an OptionError for a config without decoder layers."""
    layers = cfg.n_decoder_layers
    require(cfg, "n_decoder_layers", layers, layers > 0, "must be 1 or more: seq2seq needs an encoder-decoder")
