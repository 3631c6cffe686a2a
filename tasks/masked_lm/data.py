"""LightningDataModule for masked-LM pretraining: text -> sentences -> `[CLS] ... [SEP]` rows -> masked batches."""

from __future__ import annotations

import logging
import random
from typing import Any, Literal

from tasks.masked_lm.segments import pair_rows, single_rows, tokenize_documents
from tetraformer.data import DataError, load_tokenizer, read_text, resolve_files, train_val_split
from tetraformer.data.masking import MaskingCollator, TokenMasker
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
    The TextDataModule options (paths, text_field, encoding, tokenizer_type, vocab_size, tokenizer,
    batch_size, ...) pass through `**kwargs`.
    """

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
        """Train the run's tokenizer when none is configured, or retrain it when its settings or data changed."""
        if not self.tokenizer_path:
            self.train_run_tokenizer(resolve_files(self.require("train")))

    def setup(self, stage: str) -> None:
        """Load the tokenizer, build the masking collator and the rows the stage needs."""
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.tokenizer_dir())
        if self.collator is None:
            masker = TokenMasker.from_tokenizer(self.tokenizer, mlm_probability=self.mlm_probability)
            self.collator = MaskingCollator(masker, self.tokenizer.pad_token_id, self.whole_word_mask)
        if stage in ("fit", "validate") and "val" not in self.datasets:
            self._build_train_val(need_train=stage == "fit")
        if stage == "test":
            self.datasets["test"] = self._rows(read_text(self.require("test"), **self.read_options), "test")
        if stage == "predict":
            rows = read_text(self.require("predict"), **{**self.read_options, "documents": "line"})
            self.datasets["predict"] = fill_mask_texts(list(rows["text"]), self.tokenizer.mask_token, self.predict_path)

    def _build_train_val(self, need_train: bool) -> None:
        """Rows of the train documents, and of the val files or a seeded share of the train documents."""
        if self.val_path:
            self.datasets["val"] = self._rows(read_text(self.val_path, **self.read_options), "val")
            if need_train:
                self.datasets["train"] = self._rows(read_text(self.require("train"), **self.read_options), "train")
            return
        train, val = train_val_split(
            read_text(self.require("train"), **self.read_options), self.val_fraction, self.seed
        )
        self.datasets["train"], self.datasets["val"] = self._rows(train, "train"), self._rows(val, "val")

    def _rows(self, texts: Any, split: str) -> list[dict]:
        """Training rows of a split's documents; evaluation rows carry a mask seed (fixed masks)."""
        cls_id, sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        if cls_id is None or sep_id is None:
            raise ValueError("masked-LM rows need the tokenizer's cls and sep tokens ([CLS]/<s>, [SEP]/</s>)")
        pairs = self.next_sentence
        documents = tokenize_documents(texts["text"], self.tokenizer, self.max_length - (3 if pairs else 2))
        if pairs:
            rng = random.Random(f"{self.seed}-{split}")
            rows = pair_rows(documents, cls_id, sep_id, self.max_length, rng)
        else:
            rows = single_rows(documents, cls_id, sep_id, self.max_length)
        if not rows:
            raise ValueError(f"the {split} data gives no rows: its documents hold no text to mask")
        log.info("%s: %d documents -> %d rows of at most %d tokens", split, len(documents), len(rows), self.max_length)
        if split != "train":
            rows = [{**row, "mask_seed": self.seed + i} for i, row in enumerate(rows)]
        return rows

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
