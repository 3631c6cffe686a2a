"""Attention rollout maps of a few fixed validation images, drawn at each validation of an image task."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor

from tetraformer.core.attention_maps import (
    attention_rollout,
    backbone_of,
    cls_patch_map,
    image_attentions,
    patch_grid,
)
from tetraformer.training.distributed.strategies import forward_needs_every_rank, gathered_weights
from tetraformer.training.reports.attention_figures import rollout_grid_figure
from tetraformer.training.reports.loggers import wandb_logger

log = logging.getLogger(__name__)


class AttentionRolloutImages(Callback):
    """Writes RUN_DIR/attention/step_NNNNNN.png (image | rollout rows) at each validation; logs it to W&B.

    The module's network (`pl_module.net`, an image backbone or a classifier on one) runs in eval mode on the
    first `n_images` of the first validation batch, as `pl_module.batch_images(batch)` gives them (display uint8
    (B, C, H, W), pixel values (B, C, H, W)); the same images are used at every validation.
    """

    def __init__(self, n_images: int = 4) -> None:
        self.n_images = n_images
        self._samples: tuple[Tensor, Tensor] | None = None

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Draw on rank zero after each real validation (not the sanity check); sharded weights need every rank's
        forward."""
        if trainer.sanity_checking or self.n_images < 1:
            return
        if not (trainer.is_global_zero or forward_needs_every_rank(trainer)):
            return
        if self._samples is None:
            self._samples = first_images(trainer, pl_module, self.n_images)
        display, pixels = self._samples
        with gathered_weights(trainer):
            rollouts = rollout_maps(pl_module.net, pixels.to(pl_module.device))  # (n, gh, gw)
        if not trainer.is_global_zero:
            return
        path = Path(trainer.default_root_dir) / "attention" / f"step_{trainer.global_step:06d}.png"
        rollout_grid_figure(
            display.cpu().numpy(), rollouts.cpu().numpy(), path, title=f"attention rollout, step {trainer.global_step}"
        )
        logger = wandb_logger(trainer.loggers)
        if logger is not None:
            logger.log_image(key="val/attention_rollout", images=[str(path)], step=trainer.global_step)
        log.debug("wrote %s", path)


def first_images(trainer: L.Trainer, pl_module: Any, n: int) -> tuple[Tensor, Tensor]:
    """(display (n, C, H, W) uint8, pixel values (n, C, H, W)) of the first validation batch's first n images."""
    loaders = trainer.val_dataloaders
    loader = loaders[0] if isinstance(loaders, list | tuple) else loaders
    display, pixels = pl_module.batch_images(next(iter(loader)))
    return display[:n], pixels[:n]


def rollout_maps(net: torch.nn.Module, pixel_values: Tensor) -> Tensor:
    """(B, C, H, W) -> (B, gh, gw) [CLS] rollout over the patches, computed in eval mode (the mode is restored)."""
    backbone = backbone_of(net)
    training = net.training
    net.eval()
    try:
        weights = image_attentions(backbone, pixel_values)
    finally:
        net.train(training)
    return cls_patch_map(attention_rollout(weights), patch_grid(backbone, pixel_values))
