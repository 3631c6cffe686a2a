"""TaskDataModule: the LightningDataModule base of every task (paths, loaders, the run's tokenizer, its DataSpec)."""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from tetraformer.data.collate import PaddingCollator
from tetraformer.data.errors import DataError
from tetraformer.data.files import resolve_files
from tetraformer.data.fingerprint import Fingerprint, data_change, data_fingerprint
from tetraformer.data.hf_sources import dataset_splits
from tetraformer.data.labels import LabelVocabulary
from tetraformer.data.spec import DataSpec, TrainingBatches
from tetraformer.data.splits import train_val_split
from tetraformer.data.store import Store
from tetraformer.data.tokenizer import load_tokenizer, tokenizer_digest
from tetraformer.errors import ConfigError, TetraformerError, at_least, require
from tetraformer.files import resolve_source
from tetraformer.payload import PAYLOAD_KEY
from tetraformer.training.checkpointing.loading import source_tokenizer
from tetraformer.training.checkpointing.resume import ResumableLoader, take_batch_index
from tetraformer.training.checkpointing.stored_spec import stored_spec

log = logging.getLogger(__name__)
FINGERPRINT_KEY = "data_fingerprint"  # in the datamodule's state in a checkpoint


class TaskDataModule(L.LightningDataModule):
    """Holds the user's file paths and loader settings; subclasses build the datasets and collators.

    A path that holds named splits (a DatasetDict folder, `hf:NAME`) reads `split` (default train) as the training
    path, validation as val_path and test as test/predict_path, unless it names one (`PATH:SPLIT`).

    A fit records the fingerprint of the files it reads (data/fingerprint.py) in its checkpoints; `resume_from`
    (the CLI's `fit --ckpt_path`) keeps the run's tokenizer as the checkpoint has it and refuses, in one line, data
    whose content is not what the checkpoint trained on, unless `allow_changed_data`.

    What the network needs from the data is published as one DataSpec (`spec()`, built once after `setup`);
    evaluating a checkpoint, `use_spec` gives the data the checkpoint's spec to read with instead. `init_from`
    is the model's pretrained source, whose tokenizer the data uses (the CLI links it to --model.init_from).
    """

    def __init__(
        self,
        train_path: str | None = None,
        val_path: str | None = None,
        test_path: str | None = None,
        predict_path: str | None = None,
        tokenizer: str | None = None,
        batch_size: int = 32,
        num_workers: int = 0,
        val_fraction: float = 0.1,
        seed: int = 1234,
        init_from: str | None = None,
        split: str | None = None,
        allow_changed_data: bool = False,
    ) -> None:
        super().__init__()
        at_least(self, 1, batch_size=batch_size)
        at_least(self, 0, num_workers=num_workers)
        require(self, "val_fraction", val_fraction, 0 < val_fraction < 1, "must be more than 0 and less than 1")
        self.prepare_data_per_node = False  # RUN_DIR is shared by every node (checkpoints too): rank 0 prepares
        self.train_path, self.val_path, self.test_path, self.predict_path = dataset_splits(
            split, train_path, val_path, test_path, predict_path
        )
        self.tokenizer_path, self.batch_size, self.num_workers = tokenizer, batch_size, num_workers
        self.val_fraction, self.seed, self.init_from = val_fraction, seed, resolve_source(init_from)
        self.tokenizer: Any = None
        self.datasets: dict[str, Dataset] = {}
        self._spec: DataSpec | None = None
        self.allow_changed_data = allow_changed_data
        self.resumed_from: Path | None = None  # the checkpoint a fit resumes (resume_from)
        self._fingerprint: Fingerprint | None = None

    # --- the data-to-model contract ----------------------------------------------------------------
    def spec(self) -> DataSpec:
        """What the network needs from this data: the spec given to `use_spec`, else built once after `setup`."""
        if self._spec is None:
            self._spec = self.build_spec()
        return self._spec

    def build_spec(self) -> DataSpec:
        """The tokenizer and the longest sequence, with the task's `spec_fields` (labels, images, extras) and how
        the training split is batched."""
        option, length = self.sequence_length() or (None, 0)
        training = TrainingBatches(self.batch_size, self.epoch_tokens())
        return DataSpec.of(
            self.tokenizer, max_length=length, length_option=option, training=training, **self.spec_fields()
        )

    def spec_fields(self) -> dict[str, Any]:
        """The DataSpec fields the task's data decides besides tokenizer and length (none by default)."""
        return {}

    def use_spec(self, spec: DataSpec) -> None:
        """Read data as a checkpoint's spec says: its tokenizer (unless --data.tokenizer is set) and labels."""
        self._spec = spec
        if self.tokenizer_path is None and spec.tokenizer is not None:
            self.tokenizer = spec.tokenizer
        if spec.labels is not None:
            self.use_labels(spec.labels)

    def use_labels(self, vocabulary: LabelVocabulary) -> None:
        """Encode the data's labels with this LabelVocabulary (labelled tasks; an unknown label is a DataError)."""

    def sequence_length(self) -> tuple[str, int] | None:
        """(option, value) of the longest sequence the data feeds the model, e.g. ("--data.max_length", 256)."""
        return None

    def epoch_tokens(self) -> int | None:
        """Tokens one pass over the training rows counts in the task's `batch_tokens` (real tokens, not padding),
        where the stored rows tell it without drawing anything; None where they do not (a stream, rows a batch
        draws anew). The spec hands it over (`training`): a --run.max_tokens budget over padded text is sized by it."""
        return None

    def tokenizer_dir(self) -> Path:
        """Where this run's tokenizer lives: the configured one, or one trained into the run directory."""
        return Path(self.tokenizer_path) if self.tokenizer_path else self.run_dir() / "tokenizer"

    def load_run_tokenizer(self) -> Any:
        """The configured tokenizer, else the init_from source's, else the one trained into the run directory."""
        if self.tokenizer_path or not self.init_from:
            return load_tokenizer(self.tokenizer_dir())
        tokenizer = source_tokenizer(self.init_from)
        if tokenizer is None:
            raise DataError(f"{self.init_from} stores no tokenizer: set --data.tokenizer")
        return tokenizer

    # --- the data a fit trains on, and resuming it ----------------------------------------------------
    def fit_files(self) -> dict[str, list[Path]]:
        """The files a fit reads, by split (what its fingerprint covers)."""
        return {split: resolve_files(path) for split, path in self.split_paths("fit").items()}

    def data_fingerprint(self) -> Fingerprint:
        """The fingerprint of the files this fit reads, taken once (before they are read, from the CLI)."""
        if self._fingerprint is None:
            self._fingerprint = data_fingerprint(self.fit_files())
        return self._fingerprint

    def state_dict(self) -> dict[str, Any]:
        """What checkpoints keep of the data: its fingerprint."""
        return {FINGERPRINT_KEY: self.data_fingerprint()}

    def resume_from(self, checkpoint: dict[str, Any], path: Path) -> None:
        """Resume the fit of `checkpoint` (read from `path`): its tokenizer, never retrained, and its data, whose
        content must be the same unless `allow_changed_data` (a DataError in one line, before any work)."""
        self.resumed_from = path
        self.check_resumed_data(checkpoint, path)
        spec = stored_spec(checkpoint[PAYLOAD_KEY])
        if spec.tokenizer is not None:
            self.resume_tokenizer(spec, path)

    def check_resumed_data(self, checkpoint: dict[str, Any], path: Path) -> None:
        """The fingerprint of the data now against the one `checkpoint` recorded (files whose path, size and mtime
        are the same are not read): a DataError when the content differs, unless `allow_changed_data`."""
        recorded = (checkpoint.get(type(self).__qualname__) or {}).get(FINGERPRINT_KEY)
        if recorded is None:
            log.warning("%s records no fingerprint of the data it trained on: the data is not compared", path)
            return
        self._fingerprint = data_fingerprint(self.fit_files(), known=recorded)
        change = data_change(recorded, self._fingerprint)
        if change is None:
            return
        if not self.allow_changed_data:
            raise DataError(
                f"{change} since {path} was written: put back the data it trained on, or set "
                "--data.allow_changed_data true to continue training on the data as it is now"
            )
        log.warning("%s since %s was written: training goes on with it (--data.allow_changed_data)", change, path)

    def resume_tokenizer(self, spec: DataSpec, path: Path) -> None:
        """The run's tokenizer as this data loads it, when it is the one the checkpoint's spec holds; else the
        checkpoint's, taken as evaluating it takes it (`use_spec`: a chat template too)."""
        try:
            own = self.load_run_tokenizer()
        except (TetraformerError, OSError):
            own = None
        if own is not None and tokenizer_digest(own) == tokenizer_digest(spec.tokenizer):
            self.tokenizer = own
            return
        log.warning(
            "%s is not the tokenizer %s trained with: resuming with the one it stores", self.tokenizer_dir(), path
        )
        self.use_spec(spec)
        self._spec = None  # the fit's spec is built from its data as always

    def stores(self, stage: str) -> dict[str, Store]:
        """The stores (data/store.py) a stage reads, by split, built when missing (`tetraformer prepare`);
        none by default."""
        return {}

    def split_paths(self, stage: str) -> dict[str, str]:
        """The files a stage reads, by the split whose option names them: fit: train (and val when val_path is
        set), validate: val (else train, read whole), test and predict: theirs."""
        stage = str(getattr(stage, "value", stage))
        if stage == "fit":
            return {"train": self.require("train"), **({"val": self.val_path} if self.val_path else {})}
        if stage == "validate":
            return {"val": self.val_path} if self.val_path else {"train": self.require("train")}
        return {stage: self.require(stage)} if stage in ("test", "predict") else {}

    def run_dir(self) -> Path:
        """The run's output directory (the Trainer's default_root_dir)."""
        return Path(self.trainer.default_root_dir if self.trainer is not None else ".")

    def trainer_stage(self) -> str:
        """What the Trainer runs (fit, validate, test, predict); fit without one (`tetraformer prepare`)."""
        fn = self.trainer.state.fn if self.trainer is not None else None
        return str(getattr(fn, "value", fn or "fit"))

    def require(self, split: str) -> str:
        """The path of a split (train, test, predict), or a ConfigError naming the flag that sets it."""
        split = str(getattr(split, "value", split))  # Lightning's stages are TrainerFn, a str Enum: "predict"
        path = {"train": self.train_path, "test": self.test_path, "predict": self.predict_path}[split]
        if path:
            return path
        validating = self.trainer_stage() == "validate"  # validate reads val, else train's held-out share
        if split == "train" and validating and not self.val_path:
            raise ConfigError(
                "no validation data: set --data.val_path to a file, a directory or a glob (or --data.train_path: "
                "its held-out --data.val_fraction is validated)"
            )
        raise ConfigError(f"no {split} data: set --data.{split}_path to a file, a directory or a glob")

    def read_splits(self, stage: str, store: MutableMapping[str, Any], read: Callable[[str, bool], Any]) -> None:
        """Fill `store` with what `stage` needs, once: `read(path, predict)` gives a split's items.

        fit: train, and val from `val_path` or a seeded `val_fraction` held out of train; validate: val (else
        train); test and predict: their paths (read again on each call, as the path may have changed).
        """
        if stage == "fit" and "train" not in store:
            train = read(self.require("train"), False)
            val = read(self.val_path, False) if self.val_path else None
            if val is None:
                train, val = train_val_split(train, self.val_fraction, self.seed)
            store["train"], store["val"] = train, val
        if stage == "validate" and "val" not in store:
            store["val"] = read(self.val_path or self.require("train"), False)
        if stage in ("test", "predict"):
            store[stage] = read(self.require(stage), stage == "predict")

    def loader(self, split: str, shuffle: bool = False) -> DataLoader:
        """A DataLoader over a built split with the subclass's collator (resumable and shuffled when `shuffle`)."""
        return self.make_loader(self.datasets[split], train=shuffle, collate_fn=self.collate)

    def make_loader(
        self,
        dataset: Any,
        train: bool,
        collate_fn: Callable[[Any], Any],
        batch_sampler: Sampler[list[int]] | None = None,
        drop_last: bool = False,
    ) -> DataLoader:
        """The one way tasks build loaders: training ones shuffle per epoch from `seed` and resume mid-epoch
        (ResumableLoader); others go in order. Neither draws from the global RNG, so validating never shifts
        what training draws."""
        options: dict[str, Any] = {
            "num_workers": self.num_workers,
            "persistent_workers": self.num_workers > 0,
            "collate_fn": collate_fn,
        }
        if batch_sampler is None:
            options |= {"batch_size": self.batch_size, "drop_last": drop_last}
        else:
            options["batch_sampler"] = batch_sampler
        if train:
            shards = (self.trainer.distributed_sampler_kwargs if self.trainer else None) or {}  # data-parallel ranks
            return ResumableLoader(dataset, shuffle=batch_sampler is None, seed=self.seed, **shards, **options)
        return DataLoader(dataset, generator=torch.Generator().manual_seed(self.seed), **options)

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Tell the training loader which batch training takes (its position in the checkpoint)."""
        if self.trainer is not None and self.trainer.training:
            return take_batch_index(batch, self.trainer.train_dataloader)
        return batch

    def collate(self, rows: list[Any]) -> Any:
        """Pad rows of token sequences with the tokenizer's pad id (PaddingCollator); tasks may override."""
        pad_id = getattr(self.tokenizer, "pad_token_id", None)
        return PaddingCollator(pad_id if pad_id is not None else 0)(rows)

    def train_dataloader(self) -> DataLoader:
        """Shuffled training batches."""
        return self.loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        """Validation batches."""
        return self.loader("val")

    def test_dataloader(self) -> DataLoader:
        """Test batches."""
        return self.loader("test")

    def predict_dataloader(self) -> DataLoader:
        """Prediction batches."""
        return self.loader("predict")
