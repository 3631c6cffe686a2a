"""TaskModule: the LightningModule base of every task (optimizer, schedule, logging, checkpoint payload)."""

from __future__ import annotations

import logging
from typing import Any

import lightning as L
from lightning.pytorch.loggers import WandbLogger
from torch import Tensor, nn

from tetraformer.core.config import TransformerConfig
from tetraformer.training.checkpoint import (
    PAYLOAD_KEY,
    load_weights,
    plain,
    starting_point,
    tokenizer_from_state,
    tokenizer_state,
)
from tetraformer.training.optim import OptimizerConfig, build_optimizer

log = logging.getLogger(__name__)
FINE_TUNING_FIELDS = (
    "dropout",
    "attn_dropout",
    "ffn_dropout",
    "attention",
)  # taken from `arch` with init_from


class TaskModule(L.LightningModule):
    """Owns one network built from a TransformerConfig; subclasses define the network and the loss.

    With `init_from` (a Tetraformer checkpoint or a Hugging Face model directory) the architecture and
    weights come from that source; only the FINE_TUNING_FIELDS of `arch` apply.
    The network is built in `configure_model`, once the datamodule knows the vocabulary, or in
    `on_load_checkpoint` from the config stored in the checkpoint, so a checkpoint is all `predict` needs.
    """

    def __init__(
        self,
        arch: TransformerConfig | None = None,
        optim: OptimizerConfig | None = None,
        init_from: str | None = None,
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__()
        self.arch = arch or TransformerConfig()
        self.optim = optim or OptimizerConfig()
        self.init_from, self.label_smoothing = init_from, label_smoothing
        self.net: nn.Module | None = None
        self.tokenizer: Any = None

    # --- what a task defines -----------------------------------------------------------------------
    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """Build the task's nn.Module from a complete config."""
        raise NotImplementedError

    def network_config(self, datamodule: Any) -> TransformerConfig:
        """The architecture completed with what the data decides (vocabulary size, number of labels)."""
        return self.arch

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Forward a batch; return at least {"loss": ...}; other scalars are logged under the stage."""
        raise NotImplementedError

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Number of input tokens (or patches) in a batch, for throughput."""
        return 0

    def task_state(self) -> dict[str, Any]:
        """Task settings a checkpoint must carry (label vocabulary, ...); plain data only."""
        return {}

    def load_task_state(self, state: dict[str, Any]) -> None:
        """Restore what `task_state` saved."""

    # --- network lifecycle -------------------------------------------------------------------------
    def configure_model(self) -> None:
        """Build the network from the datamodule's tokenizer, then load starting weights if asked."""
        if self.net is not None or self._trainer is None:
            return  # already built, or loading a checkpoint outside a Trainer: on_load_checkpoint builds it
        datamodule = self.trainer.datamodule
        self.tokenizer = getattr(datamodule, "tokenizer", None)
        if not self.init_from:
            self.net = self.make_network(self.network_config(datamodule))
            return
        cfg, state = starting_point(self.init_from)
        cfg = cfg.replace(**{k: getattr(self.arch, k) for k in FINE_TUNING_FIELDS})
        self._check_vocabulary(cfg)
        self.net = self.make_network(cfg)
        load_weights(self.net, state, self.init_from)
        log.info("initialised %s from %s", type(self.net).__name__, self.init_from)

    def _check_vocabulary(self, cfg: TransformerConfig) -> None:
        """The data's tokenizer must not produce ids the pretrained embedding lacks."""
        if self.tokenizer is not None and cfg.vocab_size and len(self.tokenizer) > cfg.vocab_size:
            raise ValueError(
                f"{self.init_from} embeds {cfg.vocab_size} tokens but the data's tokenizer has {len(self.tokenizer)}: "
                "set --data.tokenizer to the pretrained model's tokenizer"
            )

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Store config, tokenizer and task settings; make hyper-parameters plain data."""
        checkpoint[PAYLOAD_KEY] = {
            "class_path": f"{type(self).__module__}.{type(self).__qualname__}",
            "model_config": self.net.cfg.to_dict(),
            "tokenizer": tokenizer_state(self.tokenizer),
            "task": plain(self.task_state()),
            "wandb_run_id": next((lg.version for lg in self.loggers if isinstance(lg, WandbLogger)), None),
        }
        if "hyper_parameters" in checkpoint:
            checkpoint["hyper_parameters"] = plain(dict(checkpoint["hyper_parameters"]))

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Rebuild the network and tokenizer from the payload when no datamodule built them."""
        payload = checkpoint[PAYLOAD_KEY]
        self.load_task_state(payload["task"])
        if self.net is None:
            self.tokenizer = tokenizer_from_state(payload["tokenizer"])
            self.net = self.make_network(TransformerConfig.from_dict(payload["model_config"]))

    # --- optimisation and logging ------------------------------------------------------------------
    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW (no decay on norms, biases, embeddings) with a per-step schedule."""
        total = int(self.trainer.estimated_stepping_batches) if self._trainer is not None else 1
        optimizer, scheduler = build_optimizer(self.net, self.optim, total, self.net.cfg.d_model)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

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
        """Compute, then log every scalar as `stage/name` (per step in training, per epoch otherwise)."""
        out = self.compute(batch, stage)
        on_step = stage == "train"
        batch_size = next(iter(batch.values())).shape[0]
        for name, value in out.items():
            self.log(f"{stage}/{name}", value, on_step=on_step, on_epoch=not on_step, prog_bar=name == "loss",
                     batch_size=batch_size, sync_dist=not on_step)  # fmt: skip
        return out["loss"]

    def cross_entropy(self, logits: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
        """Token- or sequence-level cross-entropy with the module's label smoothing."""
        smoothing = self.label_smoothing if self.training else 0.0
        return nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=ignore_index,
            label_smoothing=smoothing,
        )  # fmt: skip
