"""LightningDataModule for masked-LM pretraining: text -> sentences -> `[CLS] ... [SEP]` rows -> masked batches."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, Literal

from tasks.masked_lm.segments import DocumentPieces, pair_rows, single_rows, stored_documents
from tetraformer.data import DataError, load_tokenizer, read_text, resolve_files, train_val_split
from tetraformer.data.masking import MaskingCollator, TokenMasker
from tetraformer.data.store import ROWS, Tables, tokenize_rows
from tetraformer.data.store_rows import PositionSeed, StoreRows
from tetraformer.errors import require
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)


class MaskedLMData(TextDataModule):
    """Plain text or JSONL/JSON/CSV/TSV (a text field); each document's sentences packed into rows.

    Plain text follows BERT's format by default: one sentence per line, a blank line between documents.
    `predict` fills in the mask tokens of each line of its file (fill-mask).
    Rows are built once; masks are drawn when a batch is built, so every epoch sees new ones (validation
    and test rows keep fixed masks, so their losses compare across epochs). With `next_sentence` (the CLI
    links it to --model.next_sentence), rows are sentence pairs with segment ids and a next_sentence_label.
    Each split's rows live in a row store, built once (tokenized in batches) and reused by later runs. The
    TextDataModule options (paths, text_field, encoding, tokenizer_type, vocab_size, tokenizer, cache_dir,
    num_proc, batch_size, ...) pass through `**kwargs`.
    """

    store_name = "masked_lm"
    token_columns = ("input_ids",)

    def __init__(
        self,
        format: Literal["auto", "text", "jsonl", "json", "csv", "tsv"] = "auto",  # noqa: A002
        documents: Literal["file", "paragraph", "line"] = "paragraph",
        max_length: int = 128,
        mlm_probability: float = 0.15,
        whole_word_mask: bool = False,
        next_sentence: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        require(self, "max_length", max_length, max_length >= 4, "must be 4 or more ([CLS] A [SEP] B [SEP])")
        masking = 0 < mlm_probability < 1
        require(self, "mlm_probability", mlm_probability, masking, "must be more than 0 and less than 1")
        self.save_hyperparameters()
        self.read_options = {
            "format": format,
            "field": self.text_field,
            "documents": documents,
            "encoding": self.encoding,
        }
        self.max_length = max_length
        self.mlm_probability, self.whole_word_mask, self.next_sentence = mlm_probability, whole_word_mask, next_sentence
        self.collator: MaskingCollator | None = None

    def sequence_length(self) -> tuple[str, int]:
        """The longest sequence a batch holds, and the option that sets it."""
        return "--data.max_length", self.max_length

    def prepare_data(self) -> None:
        """Train the run's tokenizer when none is configured, or retrain it when its settings or data changed; build
        the stage's row stores."""
        if not self.tokenizer_path:
            self.train_run_tokenizer(resolve_files(self.require("train")))
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.tokenizer_dir())
        self.prepare_stores()

    # --- row stores ----------------------------------------------------------------------------------
    def split_paths(self, stage: str) -> dict[str, str]:
        """fit: train and val (the val files, or a held-out share of the train documents); validate: val; test;
        predict reads its texts as they are (no store)."""
        stage = str(getattr(stage, "value", stage))
        if stage == "fit":
            return {"train": self.require("train"), "val": self.val_path or self.require("train")}
        if stage == "validate":
            return {"val": self.val_path or self.require("train")}
        return {"test": self.require("test")} if stage == "test" else {}

    def held_out(self, split: str) -> bool:
        """Whether a split is a seeded share of the training documents (no val_path)."""
        return split in ("train", "val") and not self.val_path

    def row_options(self, split: str) -> dict[str, Any]:
        """What changes a split's rows: how text is read, the row length, next-sentence pairs (drawn from the
        seed and split) and, for a held-out split, which share of the training documents it is."""
        held_out = [self.val_fraction, self.seed] if self.held_out(split) else None
        pairs = [self.seed, split] if self.next_sentence else None
        options = {k if k != "field" else "text_field": v for k, v in self.read_options.items()}
        return {**options, "max_length": self.max_length, "next_sentence": pairs, "held_out": held_out, "part": split}

    def build_rows(self, split: str, path: str, scratch: Path) -> Tables:
        """The split's documents, tokenized in batches (DocumentPieces), packed into rows (single_rows, pair_rows)."""
        from datasets import Dataset

        cls_id, sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        if cls_id is None or sep_id is None:
            raise ValueError("masked-LM rows need the tokenizer's cls and sep tokens ([CLS]/<s>, [SEP]/</s>)")
        texts = read_text(path, **self.read_options)
        if self.held_out(split):
            texts = train_val_split(texts, self.val_fraction, self.seed)[split == "val"]
        pairs = self.next_sentence
        encode = DocumentPieces(self.tokenizer, self.max_length - (3 if pairs else 2))
        documents = stored_documents(tokenize_rows(texts, encode, scratch, self.num_proc, f"tokenizing {split} text"))
        if pairs:
            rows = pair_rows(documents, cls_id, sep_id, self.max_length, random.Random(f"{self.seed}-{split}"))
        else:
            rows = single_rows(documents, cls_id, sep_id, self.max_length)
        if not rows:
            raise ValueError(f"the {split} data gives no rows: its documents hold no text to mask")
        log.info("%s: %d documents -> %d rows of at most %d tokens", split, len(documents), len(rows), self.max_length)
        return {ROWS: Dataset.from_list(rows)}

    # --- splits --------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Load the tokenizer, build the masking collator, map the row stores the stage needs (evaluation rows
        carry a mask seed: fixed masks)."""
        stage = str(getattr(stage, "value", stage))
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.tokenizer_dir())
        if self.collator is None:
            masker = TokenMasker.from_tokenizer(self.tokenizer, mlm_probability=self.mlm_probability)
            self.collator = MaskingCollator(masker, self.tokenizer.pad_token_id, self.whole_word_mask)
        for split, store in self.stores(stage).items():
            if split not in self.datasets:
                rows = StoreRows(store.table())
                self.datasets[split] = (
                    rows if split == "train" else rows.with_hook("mask", PositionSeed("mask_seed", self.seed))
                )
        if stage == "predict":
            rows = read_text(self.require("predict"), **{**self.read_options, "documents": "line"})
            self.datasets["predict"] = fill_mask_texts(list(rows["text"]), self.tokenizer.mask_token, self.predict_path)

    def collate(self, rows: list[Any]) -> dict[str, Any]:
        """Pad and mask a batch (fresh masks for training rows, seeded ones for evaluation rows).

        Predict batches are texts in which the user wrote the mask token: encoded as they are, padded.
        """
        if isinstance(rows[0], str):
            encoded = self.tokenizer(
                rows, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
            return {
                "input_ids": encoded["input_ids"],
                "attention_mask": encoded["attention_mask"].bool(),
                "texts": rows,
            }
        return self.collator(rows)


MASK_SPELLINGS = ("[MASK]", "<mask>")  # BERT's and RoBERTa's: either is read as the tokenizer's own mask token


def fill_mask_texts(texts: list[str], mask_token: str, path: Any) -> list[str]:
    """The texts to fill in, each common mask spelling written as the tokenizer's; a text without one is an error."""
    filled = []
    for number, text in enumerate(texts, start=1):
        for spelling in MASK_SPELLINGS:
            text = text.replace(spelling, mask_token)
        if mask_token not in text:
            raise DataError(
                f"text {number} ({text[:60]!r}) has no mask token to fill in: write {mask_token} (or "
                f"{' or '.join(MASK_SPELLINGS)}) where a word is to be predicted",
                path,
            )
        filled.append(text)
    return filled
