"""LightningDataModule for text classification: labelled records -> token ids (+ segments) and label ids."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from torch.utils.data import DataLoader

from tasks.text_classification.rows import ClassificationRows
from tetraformer.data import LabelVocabulary, read_records, resolve_files
from tetraformer.data.buckets import LengthBuckets
from tetraformer.data.label_columns import LabelColumn, LabelIds
from tetraformer.data.store import ROWS, Store, Tables, tokenize_rows
from tetraformer.data.store_rows import StoreRows
from tetraformer.errors import at_least
from tetraformer.training.base.labelled import LabelledData
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)
Row = dict[str, Any]  # input_ids, token_type_ids, label (JSON, as read), labels (encoded), _source, _line; or record


class TextClassificationData(LabelledData, TextDataModule):
    """CSV/TSV/JSON/JSONL records or dataset rows with a text (and optional pair) field and a label (or labels)
    field.

    The label vocabulary comes from `labels`, a ClassLabel column's names or the training split (sorted); a
    checkpoint's vocabulary wins when the CLI gives its spec (`use_spec`). Each split's tokenized rows live in a
    row store (labels kept as read, encoded when the data is set up), built once and reused by later runs. The
    TextDataModule options (paths, text_field, encoding, tokenizer_type, vocab_size, tokenizer, cache_dir,
    num_proc, batch_size, ...) pass through `**kwargs`.
    """

    store_name = "text_classification"
    token_columns = ("input_ids",)

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
        self.label_ids: dict[str, LabelIds] = {}  # by split: each row's label id under the vocabulary

    # --- tokenizer and stores -----------------------------------------------------------------------
    def sequence_length(self) -> tuple[str, int]:
        """The longest sequence a batch holds, and the option that sets it."""
        return "--data.max_length", self.max_length

    def prepare_data(self) -> None:
        """Train the run's tokenizer unless one is configured or the init_from source brings its own; build the
        stage's row stores."""
        if not (self.tokenizer_path or self.init_from):
            self.train_run_tokenizer(resolve_files(self.require("train")))
        self.prepare_stores()

    def row_options(self, split: str) -> dict[str, Any]:
        """What changes a split's rows: how records are read, labels parsed and texts cut."""
        return {
            "format": self.format,
            "encoding": self.encoding,
            "text_field": self.text_field,
            "text_pair_field": self.pair_field,
            "label_field": self.label_field,
            "multi_label": self.multi_label,
            "label_separator": self.label_separator,
            "max_length": self.max_length,
            "predict": split == "predict",
        }

    def build_rows(self, split: str, path: str, scratch: Path) -> Tables:
        """The records of a split's files, tokenized (ClassificationRows) into the `rows` table."""
        predict = split == "predict"
        fields = [self.text_field] + ([self.pair_field] if self.pair_field else [])
        records = read_records(path, self.format, () if predict else (*fields, self.label_field), self.encoding)
        encode = ClassificationRows(
            self.tokenizer,
            self.text_field,
            self.pair_field,
            self.label_field,
            self.multi_label,
            self.label_separator,
            self.max_length,
            predict,
        )
        return {ROWS: tokenize_rows(records, encode, scratch, self.num_proc, f"tokenizing {split} records")}

    # --- splits --------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Map the row stores of the splits the stage needs; on fit, fix the label vocabulary from the training
        split; encode every split's labels with it."""
        self.read_stored_splits(stage, self.view)
        self.settle_labels("train" in self.datasets)

    def view(self, split: str, path: str, store: Store) -> StoreRows:
        """The rows of a store (records decoded to predict); rows cut to max_length are counted in one warning."""
        rows = StoreRows(store.table(), json_columns=("record",) if split == "predict" else ())
        truncated = int(rows.column("truncated").sum())
        if truncated:
            log.warning(
                "%s: %d of %d rows are longer than max_length=%d tokens and were truncated",
                path,
                truncated,
                len(rows),
                self.max_length,
            )
        return rows

    def training_vocabulary(self) -> LabelVocabulary:
        """`--data.labels` in their order, else a ClassLabel column's names, else the training split's, sorted."""
        names = self.fixed_labels or self.source_label_names(self.label_field)
        if names:
            return LabelVocabulary(names, self.multi_label)
        train = self.datasets["train"]
        return label_column(train).vocabulary(train.indices, self.multi_label)

    def use_labels(self, vocabulary: LabelVocabulary) -> None:
        """Encode every labelled split's labels; an unseen label is a DataError at its file and line."""
        self.vocabulary = vocabulary
        for split, rows in list(self.datasets.items()):
            if split != "predict":
                self.label_ids[split] = label_column(rows).encode(vocabulary, rows.indices)
                self.datasets[split] = rows.with_hook("labels", self.label_ids[split].hook())

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
        return self.label_ids["train"].counts(self.datasets["train"].indices, len(self.vocabulary))

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
        sampler = LengthBuckets(rows.lengths().tolist(), self.batch_size, self.seed)
        return self.make_loader(rows, train=True, collate_fn=self.collate, batch_sampler=sampler)


def label_column(rows: StoreRows) -> LabelColumn:
    """The raw label column of the rows' store table, coded once per table."""
    if "label" not in rows.memo:
        rows.memo["label"] = LabelColumn.of(rows.table.data.column("label"), rows.location)
    return rows.memo["label"]
