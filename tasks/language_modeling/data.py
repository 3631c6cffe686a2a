"""LightningDataModule for language modelling: text files -> tokenizer -> a corpus store -> blocks read by offset."""

from __future__ import annotations

import logging
from typing import Any, Literal

import torch

from tetraformer.data import load_tokenizer, read_text, resolve_files, train_val_split
from tetraformer.data.corpus_store import corpus_store, held_out_store, training_sources
from tetraformer.data.store import Store
from tetraformer.data.stream_sources import sample_text
from tetraformer.data.token_blocks import TokenBlocks
from tetraformer.data.token_stream_dataset import TokenStream
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.errors import at_least
from tetraformer.training.base.text_datamodule import TextDataModule
from tetraformer.training.checkpointing.stream_loader import check_stream_trainer, stream_loader

log = logging.getLogger(__name__)
TOKENIZER_SAMPLE = "tokenizer_corpus.txt"  # RUN_DIR file: the start of a streamed corpus the run tokenizer learns
TOKENIZER_SAMPLE_CHARS = 1 << 24


class LanguageModelingData(TextDataModule):
    """Plain text or JSONL files, packed into blocks with an end-of-document token between documents.

    Each split's files are tokenized once into a corpus store (data/corpus_store.py) under `cache_dir` (default
    $TETRAFORMER_CACHE_DIR/token_stores or ~/.cache/tetraformer/token_stores), reused by later runs, resumes,
    evaluations and comparison variants; blocks are read from it by offset. Global rank 0 builds the stores in
    `prepare_data` (`tetraformer prepare -c CONFIG` builds them ahead of a job); the other ranks map the same files.
    The TextDataModule options (paths, text_field, encoding, vocab_size, tokenizer, batch_size, ...) pass
    through `**kwargs`.

    With `streaming`, the training files are read as a stream instead (data/token_stream_dataset.py): tokenized
    on the fly, `shuffle_blocks` blocks shuffled together, shared out over ranks and workers, resumed exactly from
    the checkpoint; validation reads `val_path`'s store, else a store of the first `val_documents` documents,
    which training skips.
    """

    def __init__(
        self,
        format: Literal["auto", "text", "jsonl", "json", "csv", "tsv"] = "auto",  # noqa: A002
        documents: Literal["file", "paragraph", "line"] = "file",
        block_size: int = 128,
        tokenizer_type: TokenizerKind = "bpe",
        cache_dir: str | None = None,
        streaming: bool = False,
        shuffle_blocks: int = 1024,
        val_documents: int = 100,
        **kwargs: Any,
    ) -> None:
        super().__init__(tokenizer_type=tokenizer_type, **kwargs)
        at_least(self, 1, block_size=block_size, val_documents=val_documents)
        at_least(self, 0, shuffle_blocks=shuffle_blocks)
        self.save_hyperparameters()
        self.read_options = {
            "format": format,
            "field": self.text_field,
            "documents": documents,
            "encoding": self.encoding,
        }
        self.block_size, self.cache_dir = block_size, cache_dir
        self.streaming, self.shuffle_blocks, self.val_documents = streaming, shuffle_blocks, val_documents
        self._stream_checked = False
        self._stores: dict[tuple[str, str], Store] = {}  # by split and path, once mapped in this process

    def sequence_length(self) -> tuple[str, int]:
        """The longest sequence a batch holds, and the option that sets it."""
        return "--data.block_size", self.block_size

    def prepare_data(self) -> None:
        """Train the run's tokenizer when none is configured (or retrain it when its settings or data changed), then
        build the corpus stores the stage reads. Global rank 0 only (data/run_tokenizer.py, data/corpus_store.py)."""
        fn = self.trainer.state.fn if self.trainer is not None else None
        if fn == "fit":  # before any data is read
            self._check_stream()
        if not self.tokenizer_path:
            files = resolve_files(self.require("train"))
            if self.streaming:  # the start of the stream, not a whole pass over it
                text = sample_text(files, self.read_options, TOKENIZER_SAMPLE_CHARS)
                self.train_run_tokenizer_on(self.run_dir() / TOKENIZER_SAMPLE, text)
            else:
                self.train_run_tokenizer(files)
        self.stores(str(getattr(fn, "value", fn or "fit")))

    def store_paths(self, stage: str) -> dict[str, str]:
        """The splits a stage reads from corpus stores, and their paths (predict reads prompts, not a store); a
        stream's validation without val_path reads the store of its held-out first documents."""
        if self.streaming and stage in ("fit", "validate"):
            return {"val": self.val_path} if self.val_path else {"held_out": self.require("train")}
        if stage == "fit":
            return {"train": self.require("train"), **({"val": self.val_path} if self.val_path else {})}
        if stage == "validate":
            return {"val": self.val_path} if self.val_path else {"train": self.require("train")}
        return {"test": self.require("test")} if stage == "test" else {}

    def stores(self, stage: str) -> dict[str, Store]:
        """The stage's corpus stores: built here by local rank 0 when missing (a node-local cache, or no
        prepare_data), mapped by the other ranks once built."""
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.tokenizer_dir())
        build = self.trainer is None or self.trainer.local_rank == 0
        for split, path in self.store_paths(stage).items():
            if (split, path) not in self._stores:
                self._stores[split, path] = self._store(split, path, build)
        return {split: self._stores[split, path] for split, path in self.store_paths(stage).items()}

    def _store(self, split: str, path: str, build: bool) -> Store:
        """A split's corpus store, or the store of the held-out start of a stream."""
        options, name = self.read_options, f"lm-{split}"
        if split == "held_out":
            return held_out_store(name, path, self.tokenizer, options, self.val_documents, self.cache_dir, build)
        return corpus_store(name, path, self.tokenizer, options, self.cache_dir, build, self.num_proc)

    def setup(self, stage: str) -> None:
        """Load the tokenizer and map the splits the stage needs."""
        stage = str(getattr(stage, "value", stage))
        if stage == "predict" and self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.tokenizer_dir())
        if stage in ("fit", "validate") and "val" not in self.datasets:
            if self.streaming:
                if stage == "fit":
                    self._check_stream()
                self._stream(self.stores(stage), need_train=stage == "fit")
            else:
                self._train_val(self.stores(stage), need_train=stage == "fit")
        if stage == "test":
            self.datasets["test"] = TokenBlocks(self.stores(stage)["test"], self.block_size)
        if stage == "predict":
            rows = read_text(self.require("predict"), **{**self.read_options, "documents": "line"})
            self.datasets["predict"] = list(rows["text"])

    def _train_val(self, stores: dict[str, Store], need_train: bool) -> None:
        """Blocks of the train store, and of the val store or a seeded share of the train blocks."""
        if "val" in stores:
            self.datasets["val"] = TokenBlocks(stores["val"], self.block_size)
            if need_train:
                self.datasets["train"] = TokenBlocks(stores["train"], self.block_size)
            return
        blocks = TokenBlocks(stores["train"], self.block_size)
        train, val = train_val_split(torch.arange(len(blocks)), self.val_fraction, self.seed)
        self.datasets["train"], self.datasets["val"] = blocks.subset(train), blocks.subset(val)

    def _check_stream(self) -> None:
        """A streamed fit's Trainer settings, checked once in each process (check_stream_trainer)."""
        if self.streaming and not self._stream_checked:
            check_stream_trainer(self.trainer)
            self._stream_checked = True

    def _stream(self, stores: dict[str, Store], need_train: bool) -> None:
        """Validation blocks of the val (or held-out) store, and the training stream after the held-out part."""
        self.datasets["val"] = TokenBlocks(stores.get("val") or stores["held_out"], self.block_size)
        if not need_train:
            return
        self.datasets["train"] = TokenStream(
            training_sources(self.require("train"), stores.get("held_out")),
            self.read_options,
            self.tokenizer,
            self.block_size,
            self.batch_size,
            self.seed,
            self.shuffle_blocks,
        )

    def train_dataloader(self) -> Any:
        """Shuffled training batches: resumable blocks of the store, or the stream's loader."""
        if not self.streaming:
            return super().train_dataloader()
        return stream_loader(self.datasets["train"], self.num_workers, self.trainer)

    def collate(self, rows: list[Any]) -> dict[str, Any]:
        """Stack blocks; predict batches are lists of prompts."""
        if isinstance(rows[0], str):
            return {"prompts": rows}
        return {"input_ids": torch.stack(rows)}
