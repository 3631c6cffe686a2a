"""LightningDataModule for language modelling: text files -> tokenizer -> packed blocks."""

from __future__ import annotations

import logging
from typing import Any, Literal

import torch
from torch.utils.data import Dataset

from tetraformer.data import (
    load_tokenizer,
    pack_documents,
    read_text,
    resolve_files,
    train_val_split,
)
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.errors import at_least
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)


class Blocks(Dataset):
    """Rows of a (N, T + 1) block tensor as {"input_ids": (T + 1,)}."""

    def __init__(self, blocks: torch.Tensor) -> None:
        self.blocks = blocks

    def __len__(self) -> int:
        return self.blocks.shape[0]

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.blocks[index]


class LanguageModelingData(TextDataModule):
    """Plain text or JSONL files, packed into blocks with an end-of-document token between documents.

    The TextDataModule options (paths, text_field, encoding, vocab_size, tokenizer, batch_size, ...) pass
    through `**kwargs`.
    """

    def __init__(
        self,
        format: Literal["auto", "text", "jsonl", "json", "csv", "tsv"] = "auto",  # noqa: A002
        documents: Literal["file", "paragraph", "line"] = "file",
        block_size: int = 128,
        tokenizer_type: TokenizerKind = "bpe",
        **kwargs: Any,
    ) -> None:
        super().__init__(tokenizer_type=tokenizer_type, **kwargs)
        at_least(self, 1, block_size=block_size)
        self.save_hyperparameters()
        self.read_options = {
            "format": format,
            "field": self.text_field,
            "documents": documents,
            "encoding": self.encoding,
        }
        self.block_size = block_size

    def sequence_length(self) -> tuple[str, int]:
        """The longest sequence a batch holds, and the option that sets it."""
        return "--data.block_size", self.block_size

    def prepare_data(self) -> None:
        """Train the run's tokenizer when none is configured, or retrain it when its settings or data changed.

        Rank 0 only; the settings and training files are recorded beside it (data/run_tokenizer.py).
        """
        if not self.tokenizer_path:
            self.train_run_tokenizer(resolve_files(self.require("train")))

    def setup(self, stage: str) -> None:
        """Load the tokenizer and build the splits the stage needs."""
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.tokenizer_dir())
        if stage in ("fit", "validate") and "val" not in self.datasets:
            self._build_train_val(need_train=stage == "fit")
        if stage == "test":
            self.datasets["test"] = Blocks(self._blocks(self.require("test")))
        if stage == "predict":
            rows = read_text(self.require("predict"), **{**self.read_options, "documents": "line"})
            self.datasets["predict"] = list(rows["text"])

    def _build_train_val(self, need_train: bool) -> None:
        """Blocks of the train files, and of the val files or a seeded share of the train blocks."""
        if self.val_path:
            self.datasets["val"] = Blocks(self._blocks(self.val_path))
            if need_train:
                self.datasets["train"] = Blocks(self._blocks(self.require("train")))
            return
        train, val = train_val_split(self._blocks(self.require("train")), self.val_fraction, self.seed)
        self.datasets["train"], self.datasets["val"] = Blocks(train), Blocks(val)

    def _blocks(self, path: str) -> torch.Tensor:
        """(N, block_size + 1) token blocks of the documents under a path."""
        return pack_documents(read_text(path, **self.read_options), self.tokenizer, self.block_size)

    def collate(self, rows: list[Any]) -> dict[str, Any]:
        """Stack blocks; predict batches are lists of prompts."""
        if isinstance(rows[0], str):
            return {"prompts": rows}
        return {"input_ids": torch.stack(rows)}
