"""LightningDataModule for image classification: decoded uint8 splits, labels, normalisation, augmentation."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from torch.utils.data import DataLoader

from tetraformer.data import LabelVocabulary
from tetraformer.data.image_augment import Augmentation
from tetraformer.data.image_sources import ImageSet, Reading, read_source
from tetraformer.data.images import Normalization
from tetraformer.data.spec import DataSpec, ImageSpec
from tetraformer.errors import ConfigError, at_least, require
from tetraformer.training.base.datamodule import TaskDataModule
from tetraformer.training.base.labelled import LabelledData

log = logging.getLogger(__name__)
SourceFormat = Literal["folder", "csv", "tsv", "json", "jsonl", "npz"]


class ImageClassificationData(LabelledData, TaskDataModule):
    """Image folders (ROOT/<class>/<image>), CSV/TSV/JSON/JSONL of path + label, `.npz` arrays x, y, or datasets
    (Parquet/Arrow, saved or cached Hugging Face datasets) with an `image_field` column and a label.

    Images are converted to `channels` (1 or 3) and resized to `image_size` (None: `model_image_size`, which
    the CLI links to the model's `arch.image_size`), decoded once per split into a cached uint8 tensor. The label
    vocabulary comes from `labels`, a ClassLabel column's names or the training split (sorted); mean/std per
    channel from the training split or `mean`/`std`; a checkpoint's spec (`use_spec`) fixes all of them when
    evaluating it. Training batches get the augmentation options; nothing else does. The TaskDataModule options
    (paths, batch_size, num_workers, val_fraction, seed) pass through `**kwargs`.
    """

    def __init__(
        self,
        format: SourceFormat | None = None,  # noqa: A002 - None: from the path
        path_field: str = "path",
        label_field: str = "label",
        image_field: str = "image",
        channels: Literal[1, 3] = 3,
        image_size: int | None = None,
        labels: list[str] | None = None,
        mean: list[float] | None = None,
        std: list[float] | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
        skip_bad_images: bool = False,
        crop_padding: int = 0,
        hflip: bool = False,
        resized_crop_scale: float = 0.0,
        mixup_alpha: float = 0.0,
        cutmix_alpha: float = 0.0,
        erase_prob: float = 0.0,
        model_image_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        at_least(self, 1, image_size=image_size)
        for option, values in (("mean", mean), ("std", std)):
            per_channel = values is None or len(values) == channels
            require(self, option, values, per_channel, f"needs {channels} value(s), one per channel")
        require(self, "std", std, std is None or all(s > 0 for s in std), "must be more than 0 for every channel")
        require(self, "std", std, (mean is None) == (std is None), "goes with mean: give both or neither")
        self.save_hyperparameters()
        self.format, self.path_field, self.label_field = format, path_field, label_field
        self.image_field = image_field
        self.channels, self.requested_size, self.fixed_labels = channels, image_size, labels
        self.model_image_size = model_image_size
        self.given_mean, self.given_std = mean, std
        self.cache, self.cache_dir, self.skip_bad_images = cache, cache_dir, skip_bad_images
        self.augmentation = Augmentation(
            crop_padding=crop_padding,
            hflip=hflip,
            resized_crop_scale=resized_crop_scale,
            mixup_alpha=mixup_alpha,
            cutmix_alpha=cutmix_alpha,
            erase_prob=erase_prob,
        )
        self.vocabulary: LabelVocabulary | None = None
        self.normalization: Normalization | None = None

    # --- settings ----------------------------------------------------------------------------------------
    @property
    def image_size(self) -> int:
        """The size images are resized to: `image_size`, else the model's `arch.image_size` (`model_image_size`)."""
        size = self.requested_size or self.model_image_size
        if size is None:
            raise ConfigError("set --data.image_size (no model to take arch.image_size from)")
        return size

    def reading(self) -> Reading:
        """How this data's sources are decoded."""
        cache_dir = Path(self.cache_dir) if self.cache_dir else None
        return Reading(
            self.channels,
            self.image_size,
            cache_dir,
            self.cache,
            self.skip_bad_images,
            self.path_field,
            self.label_field,
            self.format,
            self.image_field,
        )

    # --- splits ------------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Decode the splits the stage needs; on fit, fix labels and normalisation from the training split."""
        self.read_splits(stage, self.datasets, self.read)
        self.settle_labels("train" in self.datasets)
        if self.normalization is None and (self.given_mean or "train" in self.datasets):
            self.normalization = self.training_normalization()

    def read(self, path: str, predict: bool = False) -> ImageSet:
        """One source's images, labelled unless predicting."""
        return read_source(path, self.reading(), labelled=not predict)

    def training_vocabulary(self) -> LabelVocabulary:
        """`--data.labels` in their order, else a ClassLabel column's names, else the training split's, sorted."""
        names = self.fixed_labels or self.source_label_names(self.label_field)
        if names:
            return LabelVocabulary(names)
        train = self.datasets["train"]
        return LabelVocabulary.from_data(train.labels, locations=train.where)

    def training_normalization(self) -> Normalization:
        """`--data.mean` / `--data.std` (one value per channel), else computed on the training images."""
        if self.given_mean and self.given_std:  # one value per channel each (checked in __init__)
            return Normalization(list(self.given_mean), list(self.given_std))
        normalization = Normalization.of(self.datasets["train"].images)
        log.info("training images: mean %s, std %s per channel", normalization.mean, normalization.std)
        return normalization

    def use_labels(self, vocabulary: LabelVocabulary) -> None:
        """Encode every built split's labels; an unknown label is a DataError naming its folder or row."""
        self.vocabulary = vocabulary
        for split in self.datasets.values():
            split.encode(vocabulary)

    def spec_fields(self) -> dict[str, Any]:
        """The label vocabulary and how images are read: size, channels, mean and std."""
        image = ImageSpec(self.image_size, self.channels, tuple(self.normalization.mean), tuple(self.normalization.std))
        return {"labels": self.vocabulary, "image": image}

    def use_spec(self, spec: DataSpec) -> None:
        """Read images as a checkpoint's spec says: its size, channels, normalisation and labels."""
        self.requested_size, self.channels = spec.image.size, spec.image.channels
        self.normalization = Normalization(list(spec.image.mean), list(spec.image.std))
        super().use_spec(spec)

    # --- batches -----------------------------------------------------------------------------------------
    def collate(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Batches come whole from ImageSet.__getitems__: pixels (B, C, S, S) uint8, labels (B,), paths."""
        return batch

    def train_collate(self, batch: dict[str, Any]) -> dict[str, Any]:
        """A training batch augmented; mixing turns labels into (B, K) probabilities."""
        pixels, labels = self.augmentation(batch["pixels"], batch["labels"], len(self.vocabulary))
        return {**batch, "pixels": pixels, "labels": labels}

    def train_dataloader(self) -> DataLoader:
        """Shuffled, augmented training batches (the last, smaller one dropped when mixing pairs images)."""
        drop_last = self.augmentation.mixes and len(self.datasets["train"]) > self.batch_size
        return self.make_loader(self.datasets["train"], train=True, collate_fn=self.train_collate, drop_last=drop_last)
