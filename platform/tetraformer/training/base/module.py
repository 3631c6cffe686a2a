"""TaskModule: the LightningModule base of every task (optimizer, schedule, metrics, reports, checkpoints)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import lightning as L
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.utilities import GradClipAlgorithmType
from torch import Tensor, nn
from torch.optim import Optimizer
from torchmetrics import Metric

from tetraformer.accel import use_bf16_layouts, use_chosen_attention
from tetraformer.accel.allocator import keep_freed_memory
from tetraformer.accel.linear_cross_entropy import lm_loss
from tetraformer.accel.numerics import Numerics, from_env, restored
from tetraformer.core.accounting import TokenCost, token_cost
from tetraformer.core.config import TransformerConfig
from tetraformer.core.lora import LoRAConfig
from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.spec import DataSpec
from tetraformer.errors import ConfigError, TetraformerError, probability
from tetraformer.files import resolve_source
from tetraformer.payload import DATA_SPEC_KEY, PAYLOAD_KEY, PRECISION_KEY, make_payload, plain
from tetraformer.training.base.clipping import clip_with_norm
from tetraformer.training.base.compile import compile_blocks
from tetraformer.training.base.lora_runs import LoRARun
from tetraformer.training.base.optim import OptimizerConfig, RunFit, build_optimizer
from tetraformer.training.base.run_length import (
    early_stops,
    end_budget_with_schedule,
    late_validation,
    passes_over_data,
    schedule_length,
)
from tetraformer.training.base.word_vectors import WordVectorsConfig, start_from_word_vectors
from tetraformer.training.callbacks.throughput import batch_rows
from tetraformer.training.checkpointing.loading import load_weights, starting_point
from tetraformer.training.checkpointing.stored_spec import stored_spec
from tetraformer.training.metrics.stages import REPORT_STAGES, confusion_metric, stage_copies
from tetraformer.training.reports.loggers import logs_this_step, wandb_logger
from tetraformer.training.reports.tables import write_reports

log = logging.getLogger(__name__)
NUMERICS_KEY = "numerics"  # the payload's entry for the run's kernel choices that change numbers
FINE_TUNING_FIELDS = (
    "dropout",
    "attn_dropout",
    "ffn_dropout",
    "attention",
    "activation_checkpointing",
)  # taken from `arch` with init_from


class TaskModule(L.LightningModule):
    """Owns one network built from a TransformerConfig; subclasses define the network and the loss.

    With `compile` every core Block of the network runs through `torch.compile` (compiled in place, so the
    checkpoint's weight names stay those of the eager network); generation's cached decoding stays eager.
    With `init_from` (a Tetraformer checkpoint or a Hugging Face model directory) the architecture and
    weights come from that source; only the FINE_TUNING_FIELDS of `arch` apply.
    The network is built from the data's DataSpec (`use_spec`, which the CLI's DataSpecHandover calls once the
    data is set up) in `configure_model`, or in `on_load_checkpoint` from the config and spec stored in the
    checkpoint, so a checkpoint is all `predict` needs; the module never reads the datamodule.
    Metrics are torchmetrics objects from `make_metrics`, one copy per stage, fed with the `preds` and
    `targets` that `compute` returns: per step in training, over the whole epoch in validation and test.
    Tasks that name their labels (`label_names`) get per-class reports in RUN_DIR/reports at each epoch end.
    """

    # Hugging Face architectures this task serves: `convert from-hf` stores it as their checkpoints' task
    hf_architectures: tuple[str, ...] = ()
    token_unit = "tokens"  # what `batch_tokens` counts, as the run's throughput summary names it
    needs_spec = True  # False: the network is built from `arch` alone when no DataSpec is handed over
    lora_trains_head = False  # True: with LoRA, the task head (new to a pretrained base) trains in full

    @property
    def fresh_parts(self) -> tuple[str, ...]:
        """The network's parts new to a pretrained base (trained in full under LoRA when `lora_trains_head`)."""
        return ("head",)

    def __init__(
        self,
        arch: TransformerConfig | None = None,
        optim: OptimizerConfig | None = None,
        init_from: str | None = None,
        label_smoothing: float = 0.0,
        compile: bool = False,  # noqa: A002  (the user-facing option is --model.compile)
        lora: LoRAConfig | None = None,
        word_vectors: WordVectorsConfig | None = None,
    ) -> None:
        super().__init__()
        probability(self, label_smoothing=label_smoothing)
        self.arch = arch or TransformerConfig()
        self.optim = optim or OptimizerConfig()
        self.init_from, self.label_smoothing = resolve_source(init_from), label_smoothing
        self.compile_network = compile  # not `self.compile`: that is nn.Module's method
        self.lora = LoRARun(lora)
        self.lora.check_base(self.init_from)
        self.word_vectors = word_vectors if word_vectors is not None and word_vectors.path else None
        if self.word_vectors is not None and self.init_from:
            raise ConfigError("--model.word_vectors starts a network from scratch; with --model.init_from, drop it")
        self.net: nn.Module | None = None
        self.spec: DataSpec | None = None  # what the data decided (use_spec), or the checkpoint's
        self.numerics: Numerics | None = None  # kernels that change numbers: the environment's, or the checkpoint's
        self.tokenizer: Any = None
        self.train_metrics: nn.ModuleDict | None = None  # built when a stage starts, once labels are known
        self.val_metrics: nn.ModuleDict | None = None
        self.test_metrics: nn.ModuleDict | None = None
        self.confusion: nn.ModuleDict | None = None  # per report stage, for tasks that name their labels
        self.step_gradient_norm: Tensor | None = None  # this step's, measured by the non-finite guard, for clipping
        self.started_from: str | None = None  # what init_from loaded, said when a fit starts from it (not a resume)

    # --- what a task defines -----------------------------------------------------------------------
    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """Build the task's nn.Module from a complete config."""
        raise NotImplementedError

    def network_config(self, spec: DataSpec) -> TransformerConfig:
        """The architecture completed with what the data decides (vocabulary size, sequence length, image size)."""
        return self.arch

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Forward a batch; return at least {"loss": ...}; other scalars are logged under the stage.

        "preds" and "targets", where the task has them, update the stage's metrics and confusion matrix
        instead of being logged (class ids or (N, C) scores, and class ids with -100 for ignored positions).
        """
        raise NotImplementedError

    def make_metrics(self) -> dict[str, Metric]:
        """The task's metrics by name, each updated with (preds, targets); copied per stage."""
        return {}

    def label_names(self) -> list[str] | None:
        """Names of the classes that preds and targets index, for per-class reports; None means no reports."""
        return None

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Number of input tokens (or patches) in a batch, for throughput."""
        return 0

    def row_tokens(self) -> int | None:
        """Tokens each training row counts for in `batch_tokens` where every row counts the same (packed blocks,
        images of one size), so a --run.max_tokens budget sizes the schedule exactly; None where rows vary (padded text:
        the data spec's `training.epoch_tokens` then gives their mean)."""
        return None

    def flop_costs(self, net: nn.Module) -> dict[str, TokenCost]:
        """Per-token training costs of the network's parts (counted once, on a meta-device twin): all of it."""
        return {"tokens": token_cost(net)}

    def batch_flops(self, batch: dict[str, Tensor], costs: dict[str, TokenCost]) -> float:
        """Training FLOPs of a batch: its `batch_tokens` through the whole network, attending over their mean
        row length (padding is not useful work). Tasks whose parts see different tokens override this."""
        tokens = self.batch_tokens(batch)
        return costs["tokens"].flops(tokens, tokens / batch_rows(batch))

    def task_state(self) -> dict[str, Any]:
        """Task settings a checkpoint must carry; plain data only.

        A classifier keeps its LabelVocabulary state under "labels": `convert to-hf` names the outputs from it.
        """
        return {}

    def load_task_state(self, state: dict[str, Any]) -> None:
        """Restore what `task_state` saved."""

    # --- network lifecycle -------------------------------------------------------------------------
    def use_spec(self, spec: DataSpec) -> None:
        """Take what the data decided; `configure_model` builds the network from it."""
        self.spec, self.tokenizer = spec, spec.tokenizer

    def configure_model(self) -> None:
        """Build the network from the DataSpec, load starting weights if asked, compile if asked; on a CPU in
        bf16, give its Linear layers the run's bf16 layouts; attention runs the run's kernels (also in a network a
        checkpoint built; accel/numerics.py); on a CPU, malloc keeps freed memory (accel/allocator.py), compiled or
        not. A compiled network keeps the stock layers."""
        if self.net is None:
            self._build_network()
        if self.net is None or self._trainer is None:
            return
        self._accelerate()

    def _accelerate(self) -> None:
        """accel's paths on the network, with the run's numerics (attention kernel, bf16 layout mode)."""
        if self.trainer.strategy.root_device.type == "cpu":
            keep_freed_memory()  # a CPU step's buffers stay in the process (compiled or not): no page faults
        if self.compile_network:
            return
        numerics = self._numerics()
        use_chosen_attention(self.net, numerics.attention)
        if self._cpu_bf16():
            layers = use_bf16_layouts(self.net, numerics.bf16_layout)
            log.debug("bf16 CPU run: %d Linear layers take the %s layouts", len(layers), numerics.bf16_layout)

    def _numerics(self) -> Numerics:
        """The run's kernel choices that change numbers (accel/numerics.py): the checkpoint's, else this process's."""
        if self.numerics is None:
            self.numerics = from_env()
        return self.numerics

    def _build_network(self) -> None:
        """The network of the DataSpec (or of `init_from`), compiled if asked; none without a spec to build from."""
        if self.spec is None:
            if self.needs_spec or self._trainer is None:
                return  # loading or evaluating a checkpoint: on_load_checkpoint builds from its config and spec
            self.use_spec(DataSpec())
        if self.init_from:
            self.net = self._pretrained_network(self.spec)
        else:
            self.net = self.make_network(self.network_config(self.spec))
            if self.word_vectors is not None and self._fitting():  # evaluating, a checkpoint's weights follow
                start_from_word_vectors(self.net, self.tokenizer, self.word_vectors)
        self.lora.adapt(self, self.net)
        if self.compile_network:
            compile_blocks(self.net)

    def _fitting(self) -> bool:
        """Whether a Trainer is fitting this module (not testing or predicting a checkpoint)."""
        return self._trainer is not None and self.trainer.state.fn == "fit"

    def _cpu_bf16(self) -> bool:
        """Whether the Trainer runs this module on the CPU in bf16 (bf16-mixed autocast or bf16-true weights)."""
        trainer = self.trainer
        return trainer.strategy.root_device.type == "cpu" and str(trainer.precision).startswith("bf16")

    def _pretrained_network(self, spec: DataSpec) -> nn.Module:
        """The network of `init_from`, fitted to the data, with its weights loaded."""
        cfg, state = starting_point(self.init_from)
        cfg = cfg.replace(**{k: getattr(self.arch, k) for k in FINE_TUNING_FIELDS})
        cfg, state = self.adapt_pretrained(cfg, state, spec)
        self._check_vocabulary(cfg)
        self._check_positions(cfg, spec)
        net = self.make_network(cfg)
        loaded = load_weights(net, state, self.init_from)
        self.started_from = f"initialised {type(net).__name__} from {self.init_from}: {loaded}"
        return net

    def base_network(self, cfg: TransformerConfig, source: str) -> nn.Module:
        """The network of a checkpoint's `cfg` with the weights of the base its LoRA adapters refer to."""
        source_cfg, state = starting_point(source)
        _, state = self.adapt_pretrained(source_cfg, state, self.spec)  # as the run fitted it (e.g. grown rows)
        net = self.make_network(cfg)
        load_weights(net, state, source)
        return net

    def adapt_pretrained(
        self, cfg: TransformerConfig, state: dict[str, Tensor], spec: DataSpec
    ) -> tuple[TransformerConfig, dict[str, Tensor]]:
        """The init_from source's config and weights fitted to this task's data (as they are by default)."""
        return cfg, state

    def _check_vocabulary(self, cfg: TransformerConfig) -> None:
        """The data's tokenizer must not produce ids the pretrained embedding lacks."""
        if self.tokenizer is not None and cfg.vocab_size and len(self.tokenizer) > cfg.vocab_size:
            raise ValueError(
                f"{self.init_from} embeds {cfg.vocab_size} tokens but the data's tokenizer has {len(self.tokenizer)}: "
                "set --data.tokenizer to the pretrained model's tokenizer"
            )

    def _check_positions(self, cfg: TransformerConfig, spec: DataSpec) -> None:
        """The data's sequences must fit the pretrained model's position table."""
        option, length = spec.length_option, spec.max_length
        if option is not None and cfg.absolute_positions and length > cfg.max_len:
            raise TetraformerError(
                f"{option} {length} is longer than {self.init_from} handles (max_len {cfg.max_len}): "
                f"set {option} to at most {cfg.max_len}"
            )

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Store config, tokenizer, the data's spec, task settings and the precision trained in; make hyper-parameters
        plain data."""
        checkpoint[PAYLOAD_KEY] = make_payload(
            f"{type(self).__module__}.{type(self).__qualname__}",
            self.net.cfg,
            self.tokenizer,
            self.task_state(),
            wandb_run_id=next((lg.version for lg in self.loggers if isinstance(lg, WandbLogger)), None),
            **{DATA_SPEC_KEY: (self.spec or DataSpec()).state()},
            **{PRECISION_KEY: str(self.trainer.precision) if self._trainer is not None else None},
        )
        checkpoint[PAYLOAD_KEY][NUMERICS_KEY] = self._numerics().state()
        self.lora.save(self, checkpoint)
        if "hyper_parameters" in checkpoint:
            checkpoint["hyper_parameters"] = plain(dict(checkpoint["hyper_parameters"]))

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Rebuild the network, tokenizer and spec from the payload when no handed-over spec built them."""
        payload = checkpoint[PAYLOAD_KEY]
        self.load_task_state(payload["task"])
        self.started_from = None  # the checkpoint's weights replace what init_from loaded
        if self.net is None:
            self.use_spec(stored_spec(payload))
            self.net = self.lora.stored_network(self, payload) or self.make_network(
                TransformerConfig.from_dict(payload["model_config"])
            )
        self.lora.load(self, checkpoint)
        self.numerics = restored(payload.get(NUMERICS_KEY))  # a resume computes as the run it continues
        if self._trainer is not None:
            self._accelerate()

    # --- optimisation and logging ------------------------------------------------------------------
    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW (no decay on norms, biases, embeddings) with a per-step schedule."""
        total, fit = 1, RunFit()
        if self._trainer is not None:
            total, sized_by = schedule_length(self.trainer)
            end_budget_with_schedule(self.trainer, total)
            says = self.trainer.is_global_zero
            fit = RunFit(sized_by, early_stops(self.trainer), passes_over_data(self.trainer, total), says)
            if says and (line := late_validation(self.trainer, total)) is not None:
                log.warning(line)
        settings = self.optim
        if settings.fused is None and self._scaled_clipping():
            settings = dataclasses.replace(settings, fused=False)  # a fused step unscales inside: nothing to clip
        optimizer, scheduler = build_optimizer(self.net, settings, total, self.net.cfg.d_model, fit)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def _scaled_clipping(self) -> bool:
        """Whether gradients are clipped under a gradient scaler (16-mixed)."""
        trainer = self._trainer
        plugin = trainer.precision_plugin if trainer is not None else None
        return bool(trainer and trainer.gradient_clip_val) and getattr(plugin, "scaler", None) is not None

    def configure_gradient_clipping(
        self, optimizer: Optimizer, gradient_clip_val: float | None = None, gradient_clip_algorithm: str | None = None
    ) -> None:
        """Clip as Lightning does, except that a fused optimizer is clipped under bf16-mixed: Lightning refuses it
        under every mixed precision, but without a gradient scaler there is nothing left to unscale. Where the
        non-finite guard has measured the step's gradient norm, clipping by norm uses it instead of measuring again."""
        norm, self.step_gradient_norm = self.step_gradient_norm, None
        if clip_with_norm(self.trainer, optimizer, gradient_clip_val, gradient_clip_algorithm, norm):
            return
        plugin = self.trainer.precision_plugin
        if gradient_clip_val and isinstance(plugin, MixedPrecision) and plugin.scaler is None:
            algorithm = GradClipAlgorithmType(gradient_clip_algorithm or "norm")
            Precision.clip_gradients(plugin, optimizer, gradient_clip_val, algorithm)  # the base class: no refusal
            return
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        """One optimisation step's loss."""
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        """Validation loss and metrics."""
        return self._step(batch, "val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        """Test loss and metrics."""
        return self._step(batch, "test")

    def _step(self, batch: dict[str, Tensor], stage: str) -> Tensor:
        """Compute, then log scalars and metrics as `stage/name` (per step in training, else per epoch)."""
        out = self.compute(batch, stage)
        preds, targets = out.pop("preds", None), out.pop("targets", None)
        on_step = stage == "train"
        if on_step and not self._train_values_read():  # Lightning's self.log costs 1-5 ms a call on CPU
            return out["loss"]
        batch_size = batch_rows(batch)
        for name, value in out.items():
            self.log(
                f"{stage}/{name}",
                value,
                on_step=on_step,
                on_epoch=not on_step,
                prog_bar=name == "loss",
                batch_size=batch_size,
                sync_dist=not on_step,
            )
        if preds is not None:
            self._update_metrics(stage, preds, targets, batch_size)
        return out["loss"]

    def on_fit_start(self) -> None:
        """Build the metrics, and say what init_from loaded unless a checkpoint replaced it (subclasses overriding
        this hook call super)."""
        self._build_metrics()
        if self.started_from and self.trainer.is_global_zero:
            log.info("%s", self.started_from)

    def on_validation_start(self) -> None:
        """Build the metrics when validating alone."""
        self._build_metrics()

    def on_test_start(self) -> None:
        """Build the metrics when testing alone."""
        self._build_metrics()

    def _build_metrics(self) -> None:
        """Once: per-stage copies of the task's metrics, and confusion matrices when labels are named.

        Built when a stage starts, after any checkpoint restore, so the label vocabulary is known wherever it
        comes from; they are moved to the module's device here (Lightning has placed the module already).
        """
        if self.val_metrics is not None:
            return
        for stage, metrics in stage_copies(self.make_metrics()).items():
            setattr(self, f"{stage}_metrics", metrics.to(self.device))
        names = self.label_names()
        if names:
            confusion = {stage: confusion_metric(len(names)) for stage in REPORT_STAGES}
            self.confusion = nn.ModuleDict(confusion).to(self.device)

    def _update_metrics(self, stage: str, preds: Tensor, targets: Tensor, batch_size: int) -> None:
        """Feed the stage's metrics and log the objects: Lightning computes and resets them at epoch end."""
        on_step = stage == "train"
        for name, metric in (getattr(self, f"{stage}_metrics") or {}).items():
            if on_step:
                metric(preds, targets)  # forward: the step's own value, logged like train/loss
            else:
                metric.update(preds, targets)
            self.log(
                f"{stage}/{name}",
                metric,
                on_step=on_step,
                on_epoch=not on_step,
                batch_size=batch_size,
                metric_attribute=f"{stage}_metrics.{name}",
            )
        if self.confusion is not None and stage in self.confusion:
            self.confusion[stage].update(preds, targets)

    def _train_values_read(self) -> bool:
        """Whether anything reads this training step's logged values: the rows Lightning writes (every
        log_every_n_steps, and the step budget's last), a progress bar, or callbacks at the epoch's end.

        A step's values are its own batch's (loss, and metrics by their forward), so skipping the others leaves
        metrics.csv and W&B as they were; a monitor of train/* at a mid-epoch validation sees the last written step.
        """
        trainer = self._trainer
        if trainer is None or trainer.progress_bar_callback is not None:
            return True
        epoch_loop = trainer.fit_loop.epoch_loop
        return (
            logs_this_step(trainer)
            or 0 < trainer.max_steps <= trainer.global_step + 1
            or epoch_loop.batch_progress.is_last_batch
        )

    def on_validation_epoch_end(self) -> None:
        """Per-class reports of the validation epoch."""
        self._report("val")

    def on_test_epoch_end(self) -> None:
        """Per-class reports of the test epoch."""
        self._report("test")

    def _report(self, stage: str) -> None:
        """Compute the epoch's confusion matrix on every rank; rank zero writes the reports."""
        if self.confusion is None or stage not in self.confusion or self.confusion[stage].update_count == 0:
            return
        matrix = self.confusion[stage].compute()  # (C, C), summed over processes
        self.confusion[stage].reset()
        if self.trainer.sanity_checking or not self.trainer.is_global_zero:
            return
        write_reports(
            self.trainer.default_root_dir,
            stage,
            matrix.cpu().numpy(),
            self.label_names(),
            wandb_logger(self.loggers),
            self.global_step,
        )

    def lm_loss(self, targets: Tensor, *args: Any, **kw: Any) -> Tensor:
        """Cross-entropy of the network's LM logits for (args, kw) against (B, T) targets (IGNORE_INDEX skipped),
        through the run's LM loss path (accel/numerics.py: the logits, or the fused head and loss that skips the
        (N, V) logits with TETRAFORMER_LM_LOSS=fused); a sharded network (FSDP) computes its logits."""
        if self._trainer is not None and "FSDP" in type(self.trainer.strategy).__name__:
            return self.cross_entropy(self.net(*args, **kw), targets)
        h = self.net(*args, features_only=True, **kw)  # (B, T, D)
        smoothing = self.label_smoothing if self.training else 0.0
        return lm_loss(self.net.lm_head, h, targets, IGNORE_INDEX, smoothing, self._numerics().lm_loss)

    def cross_entropy(
        self, logits: Tensor, targets: Tensor, weight: Tensor | None = None, ignore_index: int = IGNORE_INDEX
    ) -> Tensor:
        """Cross-entropy of (..., C) logits with the module's label smoothing (in training only).

        Targets are class ids (...), `ignore_index` skipped, or class probabilities (..., C) (mixed images);
        `weight` (C,) weighs the classes.
        """
        classes = logits.shape[-1]
        soft = targets.is_floating_point()
        return nn.functional.cross_entropy(
            logits.reshape(-1, classes).float(),
            targets.reshape(-1, classes) if soft else targets.reshape(-1),
            weight=None if weight is None else weight.to(logits.device),
            ignore_index=ignore_index,
            label_smoothing=self.label_smoothing if self.training else 0.0,
        )
