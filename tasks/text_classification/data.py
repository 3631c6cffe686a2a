"""LightningDataModule for text classification: labelled records -> token ids (+ segments) and label ids."""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any, Literal

from torch.utils.data import DataLoader

from tetraformer.data import DataError, LabelVocabulary, read_records, resolve_files
from tetraformer.data.buckets import LengthBuckets
from tetraformer.data.records import LINE_COLUMN, SOURCE_COLUMN
from tetraformer.errors import at_least
from tetraformer.training.base.labelled import LabelledData
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)
Row = dict[str, Any]  # input_ids, token_type_ids, then label (raw), labels (encoded), where, or record


class TextClassificationData(LabelledData, TextDataModule):
    """CSV/TSV/JSON/JSONL records or dataset rows with a text (and optional pair) field and a label (or labels)
    field.

    The label vocabulary comes from `labels`, a ClassLabel column's names or the training split (sorted); a
    checkpoint's vocabulary wins when the CLI gives its spec (`use_spec`). The TextDataModule options (paths,
    text_field, encoding, tokenizer_type, vocab_size, tokenizer, batch_size, ...) pass through `**kwargs`.
    """

    def __init__(
        self,
        format: Literal["jsonl", "json", "csv", "tsv"] | None = None,  # noqa: A002 - None: from the suffix
        text_pair_field: str | None = None,
        label_field: str = "label",
        multi_label: bool = False,
        label_separator: str | None = None,
        labels: list[str] | None = None,
        max_length: int = 256,
        bucket: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        at_least(self, 1, max_length=max_length)
        self.save_hyperparameters()
        self.format, self.pair_field, self.label_field = format, text_pair_field, label_field
        self.multi_label, self.label_separator = multi_label, label_separator
        self.fixed_labels, self.max_length, self.bucket = labels, max_length, bucket
        self.vocabulary: LabelVocabulary | None = None

    # --- tokenizer -----------------------------------------------------------------------------------
    def sequence_length(self) -> tuple[str, int]:
        """The longest sequence a batch holds, and the option that sets it."""
        return "--data.max_length", self.max_length

    def prepare_data(self) -> None:
        """Train the run's tokenizer unless one is configured or the init_from source brings its own."""
        if not (self.tokenizer_path or self.init_from):
            self.train_run_tokenizer(resolve_files(self.require("train")))

    # --- splits --------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Tokenize the splits the stage needs; on fit, fix the label vocabulary from the training split."""
        if self.tokenizer is None:
            self.tokenizer = self.load_run_tokenizer()
        self.read_splits(stage, self.datasets, self.read)
        self.settle_labels("train" in self.datasets)

    def training_vocabulary(self) -> LabelVocabulary:
        """`--data.labels` in their order, else a ClassLabel column's names, else the training split's, sorted."""
        names = self.fixed_labels or self.source_label_names(self.label_field)
        if names:
            return LabelVocabulary(names, self.multi_label)
        rows = self.datasets["train"]
        return LabelVocabulary.from_data((r["label"] for r in rows), self.multi_label, (r["where"] for r in rows))

    def use_labels(self, vocabulary: LabelVocabulary) -> None:
        """Encode every built split's labels; an unseen label is a DataError at its file and line."""
        self.vocabulary = vocabulary
        for rows in self.datasets.values():
            for row in rows:
                if "label" in row:
                    row["labels"] = vocabulary.encode(row["label"], *row["where"])

    def spec_fields(self) -> dict[str, Any]:
        """The label vocabulary; with training data, the rows per label (`--model.class_weights balanced`)."""
        if "train" not in self.datasets:
            return {"labels": self.vocabulary}
        return {
            "labels": self.vocabulary,
            "extras": {"label_counts": self.label_counts(), "rows": len(self.datasets["train"])},
        }

    def label_counts(self) -> list[int]:
        """How many training rows carry each label (class weights)."""
        counts: Counter[int] = Counter()
        for row in self.datasets["train"]:
            labels = row["labels"]
            counts.update(labels.nonzero().flatten().tolist() if self.multi_label else [labels])
        return [counts[i] for i in range(len(self.vocabulary))]

    # --- reading -------------------------------------------------------------------------------------
    def read(self, path: str, predict: bool = False) -> list[Row]:
        """Rows of a file (or files): token ids, segment ids, and the raw label or, to predict, the record."""
        fields = [self.text_field] + ([self.pair_field] if self.pair_field else [])
        required = () if predict else (*fields, self.label_field)
        records = read_records(path, self.format, required, self.encoding)
        texts: list[list[str]] = [[], []]
        rows: list[Row] = []
        for record in records:
            where = (record[SOURCE_COLUMN], record[LINE_COLUMN])
            for slot, field in enumerate(fields):
                texts[slot].append(_text(record, field, where))
            row: Row = {"where": where}
            if predict:
                row["record"] = {k: v for k, v in record.items() if k not in (SOURCE_COLUMN, LINE_COLUMN)}
            else:
                row["label"] = self.parse_label(record[self.label_field], where)
            rows.append(row)
        for row, encoded in zip(rows, self.encode(texts[0], texts[1] or None, path), strict=True):
            row.update(encoded)
        return rows

    def parse_label(self, value: Any, where: tuple[str, int]) -> Any:
        """A label as read, or for multi-label data a list (a JSON list, a delimited string or one label)."""
        if not self.multi_label or isinstance(value, list):
            return value
        text = str(value).strip()
        if self.label_separator:
            return [part.strip() for part in text.split(self.label_separator) if part.strip()]
        if text.startswith("["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as err:
                raise DataError(f"labels are not a valid JSON list: {err.msg}", *where) from None
        return [text] if text else []

    def encode(self, texts: list[str], pairs: list[str] | None, path: str) -> list[Row]:
        """Token ids and segment ids through the tokenizer's own template; long rows truncated, counted once."""
        full = self.tokenizer(texts, pairs, add_special_tokens=True)["input_ids"]
        long = [i for i, ids in enumerate(full) if len(ids) > self.max_length]
        out = self.tokenizer(texts, pairs, truncation=bool(long), max_length=self.max_length if long else None)
        if long:
            log.warning(
                "%s: %d of %d rows are longer than max_length=%d tokens and were truncated",
                path,
                len(long),
                len(texts),
                self.max_length,
            )
        # segment ids from the tokenizer's own template (its type ids), whether or not it returns them itself
        types = [e.type_ids for e in out.encodings] if out.encodings else out.get("token_type_ids")
        types = types or [[0] * len(ids) for ids in out["input_ids"]]
        return [{"input_ids": ids, "token_type_ids": t} for ids, t in zip(out["input_ids"], types, strict=True)]

    # --- batches -------------------------------------------------------------------------------------
    def collate(self, rows: list[Row]) -> dict[str, Any]:
        """Pad ids and segments to the batch's longest row; stack labels; keep records (predict) as a list."""
        keep = ("input_ids", "token_type_ids", "labels", "record")
        return super().collate([{k: row[k] for k in keep if k in row} for row in rows])

    def train_dataloader(self) -> DataLoader:
        """Shuffled batches, or with `bucket` batches of rows of similar length (shuffled buckets)."""
        if not self.bucket:
            return super().train_dataloader()
        rows = self.datasets["train"]
        sampler = LengthBuckets([len(r["input_ids"]) for r in rows], self.batch_size, self.seed)
        return self.make_loader(rows, train=True, collate_fn=self.collate, batch_sampler=sampler)


def _text(record: dict[str, Any], field: str, where: tuple[str, int]) -> str:
    """A record's non-empty text field; a missing field or an empty text is a DataError at the row."""
    if field not in record or record[field] is None:
        keys = ", ".join(repr(k) for k in record if k not in (SOURCE_COLUMN, LINE_COLUMN))
        raise DataError(f"missing field {field!r} (keys present: {keys})", *where)
    text = str(record[field])
    if not text.strip():
        raise DataError(f"empty text in field {field!r}", *where)
    return text
