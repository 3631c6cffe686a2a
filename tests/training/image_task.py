"""A tiny image TaskModule and datamodule honouring the image task's contract, for attention-map tests.

The module has `net` = SequenceClassifier(ImageEncoder(cfg), ...), `image_inputs(path)` and `batch_images(batch)`;
the datamodule's batches carry uint8 `pixels` beside `pixel_values`; the module returns AttentionRolloutImages from
`configure_callbacks`.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import Logger
from PIL import Image
from torch import Tensor, nn
from torch.utils.data import DataLoader

from tetraformer.core import ImageEncoder, SequenceClassifier, TransformerConfig
from tetraformer.training.base.module import TaskModule
from tetraformer.training.callbacks.attention_maps import AttentionRolloutImages

IMAGE_ARCH = dict(
    d_model=32,
    n_heads=2,
    n_layers=2,
    d_ff=64,
    vocab_size=0,
    image_size=16,
    patch_size=4,
    n_channels=1,
    dropout=0.0,
    attn_dropout=0.0,
    attention="sdpa",
)


def normalise(display: Tensor) -> Tensor:
    """uint8 images -> the pixel values the network reads, as a validation transform would."""
    return display.float() / 127.5 - 1.0


class TinyImageTask(TaskModule):
    """A ViT classifier of bright-top vs bright-bottom images that draws rollout maps at each validation."""

    needs_spec = False  # the image size and channels are the arch's

    def __init__(self, arch: TransformerConfig | dict | None = None, n_images: int = 2) -> None:
        super().__init__(TransformerConfig.from_dict(arch) if isinstance(arch, dict) else arch)
        self.n_images = n_images
        self.save_hyperparameters()

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A [CLS]-pooled classifier on the ViT backbone."""
        return SequenceClassifier(ImageEncoder(cfg), 2)

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Cross-entropy of the images' classes."""
        return {"loss": self.cross_entropy(self.net(batch["pixel_values"]), batch["labels"])}

    def image_inputs(self, path: str | Path) -> tuple[Tensor, Tensor]:
        """(display (C, H, W) uint8, pixel values (1, C, H, W)) of an image file, as the model reads it."""
        cfg = self.net.cfg
        image = Image.open(path).convert("L" if cfg.n_channels == 1 else "RGB").resize((cfg.image_size,) * 2)
        display = torch.from_numpy(np.asarray(image).copy()).reshape(cfg.image_size, cfg.image_size, -1)
        display = display.permute(2, 0, 1)  # (C, H, W)
        return display, normalise(display)[None].to(self.device)

    def batch_images(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """(display (B, C, H, W) uint8, pixel values (B, C, H, W)) of a batch."""
        return batch["pixels"], batch["pixel_values"]

    def configure_callbacks(self) -> list[Callback]:
        """The image task's rollout pictures."""
        return [AttentionRolloutImages(n_images=self.n_images)]


def striped_images(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """(n, 1, 16, 16) uint8 images bright in the top or bottom half, and that half's class (0 top, 1 bottom)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=generator)
    images = torch.randint(0, 60, (n, 1, 16, 16), generator=generator, dtype=torch.uint8)
    for i, label in enumerate(labels.tolist()):
        images[i, :, 8 * label : 8 * label + 8] += 180
    return images, labels


class TinyImageData(L.LightningDataModule):
    """Train and val loaders of striped images (uint8 `pixels` and normalised `pixel_values`)."""

    def __init__(self) -> None:
        super().__init__()
        self.splits = {"train": striped_images(64, 0), "val": striped_images(16, 1)}

    def train_dataloader(self) -> DataLoader:
        """Shuffled training batches."""
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        """Validation batches."""
        return self._loader("val", shuffle=False)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        images, labels = self.splits[split]
        rows = [
            {"pixels": d, "pixel_values": x, "labels": y}
            for d, x, y in zip(images, normalise(images), labels, strict=True)
        ]
        return DataLoader(rows, batch_size=16, shuffle=shuffle)


def train_image_task(root: Path, logger: Logger | bool = False, steps: int = 4) -> Path:
    """Train the tiny image task a few steps, validating every 2; returns RUN_DIR/image.ckpt."""
    trainer = L.Trainer(
        default_root_dir=root,
        max_steps=steps,
        val_check_interval=2,
        log_every_n_steps=1,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(TinyImageTask(TransformerConfig(**IMAGE_ARCH)), datamodule=TinyImageData())
    trainer.save_checkpoint(root / "image.ckpt")
    return root / "image.ckpt"
