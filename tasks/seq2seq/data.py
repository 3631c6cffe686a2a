"""LightningDataModule for sequence-to-sequence: (source, target) pairs -> source ids, labels, shifted decoder ids."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from tasks.seq2seq.reading import Pair, PairFile, read_pairs, read_parallel, read_sources
from tasks.seq2seq.rows import PAIR_COLUMNS, PairRows, TextChunks, pair_table
from tetraformer.data import DataError, read_text
from tetraformer.data.files import resolve_files
from tetraformer.data.records import RecordFormat
from tetraformer.data.seq2seq_batch import Seq2SeqCollator
from tetraformer.data.span_corruption import SpanCorruptionCollator, SpanCorruptor
from tetraformer.data.splits import train_val_split
from tetraformer.data.store import ROWS, Store, Tables, tokenize_rows
from tetraformer.data.store_rows import PositionSeed, StoreRows
from tetraformer.data.text import text_format
from tetraformer.data.tokenizer import TokenizerKind, decoder_start_token
from tetraformer.errors import at_least, require
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)
Row = dict[str, Any]  # input_ids, source, target, record, labels (absent to predict); or input_ids (, noise_seed)
CORPUS = "tokenizer_corpus.txt"  # RUN_DIR file of both sides' texts the run's tokenizer trains on
Objective = Literal["pairs", "span_corruption"]
MIXTURE, PARALLEL = "<mixture>", "<parallel files>"  # training sources that are not one path


class Seq2SeqData(TextDataModule):
    """Pairs from JSONL/JSON/CSV/TSV records, two parallel text files, or a mixture of files with their prefixes.

    Training data is, in order of precedence: `mixture` (files each with its own source prefix), the parallel
    `source_path`/`target_path`, or `train_path`. One tokenizer serves both sides: `tokenizer`, else the
    `init_from` source's, else one trained on both sides of the training pairs into RUN_DIR/tokenizer.
    The TextDataModule options (paths, encoding, vocab_size, tokenizer, batch_size, ...) pass through `**kwargs`.

    `objective: span_corruption` pretrains on plain text instead (T5's objective): `train_path` holds text or
    JSONL (`text_field`, or a list of fields each read as texts), cut into chunks that fit `max_source_length`;
    the run's tokenizer then reserves `extra_ids` sentinels, and batches are corrupted anew
    each epoch (validation rows always the same way).

    Each split's tokenized rows (or chunks) live in a row store, built once and reused by later runs.
    """

    store_name = "seq2seq"
    token_columns = ("input_ids", "labels")  # a batch's real tokens: the source's and the target's (batch_tokens)

    def __init__(
        self,
        format: RecordFormat | None = None,  # noqa: A002 - None: from the suffix
        source_field: str = "source",
        target_field: str = "target",
        source_prefix: str = "",
        source_path: str | None = None,
        target_path: str | None = None,
        mixture: list[PairFile] | None = None,
        max_source_length: int = 128,
        max_target_length: int = 128,
        tokenizer_type: TokenizerKind = "unigram",
        objective: Objective = "pairs",
        text_field: str | list[str] | None = "text",
        noise_density: float = 0.15,
        mean_span_length: float = 3.0,
        extra_ids: int = 100,
        **kwargs: Any,
    ) -> None:
        super().__init__(tokenizer_type=tokenizer_type, text_field=text_field, **kwargs)
        at_least(self, 1, max_source_length=max_source_length, max_target_length=max_target_length)
        at_least(self, 1, mean_span_length=mean_span_length)
        at_least(self, 0, extra_ids=extra_ids)
        require(self, "noise_density", noise_density, 0 < noise_density < 1, "must be more than 0 and less than 1")
        self.save_hyperparameters()
        self.format, self.fields, self.source_prefix = format, (source_field, target_field), source_prefix
        self.source_path, self.target_path, self.mixture = source_path, target_path, mixture
        self.max_source_length, self.max_target_length = max_source_length, max_target_length
        self.objective, self.extra_ids = objective, extra_ids
        self.noise = {"noise_density": noise_density, "mean_span_length": mean_span_length}

    def spec_fields(self) -> dict[str, Any]:
        """The source prefix, which `generate` puts before prompts that lack it."""
        return {"extras": {"source_prefix": self.source_prefix}}

    # --- tokenizer -----------------------------------------------------------------------------------
    def sequence_length(self) -> tuple[str, int]:
        """The longest sequence a batch holds, and the option that sets it."""
        if self.max_target_length > self.max_source_length:
            return "--data.max_target_length", self.max_target_length
        return "--data.max_source_length", self.max_source_length

    def prepare_data(self) -> None:
        """Train the run's tokenizer on both sides of the training pairs, unless one is configured or inherited;
        build the stage's row stores."""
        if not (self.tokenizer_path or self.init_from):
            if self.objective == "span_corruption":
                texts, extra_ids = self.documents(self.require("train")), self.extra_ids
            else:
                texts, extra_ids = [t for pair in self.training_pairs() for t in (pair.source, pair.target)], 0
            corpus = "".join(text.replace("\n", " ") + "\n" for text in texts)
            self.train_run_tokenizer_on(self.run_dir() / CORPUS, corpus, extra_ids)
        self.prepare_stores()

    # --- reading -------------------------------------------------------------------------------------
    def training_pairs(self) -> list[Pair]:
        """The training pairs: the mixture's files, the parallel files, or train_path."""
        if self.mixture:
            return [p for f in self.mixture for p in self.read(f.path, f.source_prefix)]
        if self.source_path or self.target_path:
            if not (self.source_path and self.target_path):
                raise ValueError("parallel files need both --data.source_path and --data.target_path")
            return read_parallel(self.source_path, self.target_path, self.source_prefix, self.encoding)
        return self.read(self.require("train"), self.source_prefix)

    def read(self, path: str, prefix: str, with_target: bool = True) -> list[Pair]:
        """Pairs of one path (sources only to predict, where plain text is one source per line)."""
        if not with_target and Path(path).suffix.lower() == ".txt":
            return read_sources(path, prefix, self.encoding)
        return read_pairs(path, self.format, self.fields, prefix, self.encoding, with_target)

    def documents(self, path: str) -> list[str]:
        """The texts of plain-text files (one per line, read once) or of records' text field(s) (span corruption)."""
        fields = [self.text_field] if isinstance(self.text_field, str) else list(self.text_field or [])
        texts: list[str] = []
        for file in resolve_files(path):
            if text_format(file) == "text":
                texts += read_text(file, documents="line", encoding=self.encoding)["text"]
                continue
            if not fields:
                raise DataError("records need --data.text_field (the field, or list of fields, holding text)", file)
            for field in fields:
                texts += read_text(file, field=field, documents="line", encoding=self.encoding)["text"]
        return texts

    # --- row stores ----------------------------------------------------------------------------------
    def training_source(self) -> str:
        """What the training split is read from: the mixture, the parallel files, or train_path."""
        if self.objective == "pairs" and self.mixture:
            return MIXTURE
        if self.objective == "pairs" and (self.source_path or self.target_path):
            return PARALLEL
        return self.require("train")

    def split_paths(self, stage: str) -> dict[str, str]:
        """The base's splits, the training one read from `training_source`."""
        stage = str(getattr(stage, "value", stage))
        if stage == "fit":
            return {"train": self.training_source(), **({"val": self.val_path} if self.val_path else {})}
        if stage == "validate" and not self.val_path:
            return {"train": self.training_source()}
        return super().split_paths(stage)

    def store_files(self, split: str, path: str) -> list[Path]:
        """The mixture's files, the two parallel files, or the split's path's files."""
        if path == MIXTURE:
            return [file for part in self.mixture or [] for file in resolve_files(part.path)]
        if path == PARALLEL:
            return resolve_files([p for p in (self.source_path, self.target_path) if p])
        return resolve_files(path)

    def row_options(self, split: str) -> dict[str, Any]:
        """What changes a split's rows: the objective, how pairs (or texts) are read, prefixed and cut."""
        if self.objective == "span_corruption":
            fields = self.text_field
            return {"objective": self.objective, "text_field": fields, "encoding": self.encoding, "size": self.chunk}
        prefixes = [[part.path, part.source_prefix] for part in self.mixture or []] if split == "train" else []
        return {
            "objective": self.objective,
            "format": self.format,
            "fields": list(self.fields),
            "encoding": self.encoding,
            "source_prefix": self.source_prefix,
            "mixture_prefixes": prefixes,
            "max_source_length": self.max_source_length,
            "max_target_length": self.max_target_length,
            "with_target": split != "predict",
        }

    def build_rows(self, split: str, path: str, scratch: Path) -> Tables:
        """Chunks of the texts (span corruption), or the tokenized pairs (PairRows) of the split."""
        from datasets import Dataset

        if self.objective == "span_corruption":
            texts = Dataset.from_dict({"text": self.documents(path)})
            return {ROWS: tokenize_rows(texts, TextChunks(self.tokenizer, self.chunk), scratch, self.num_proc)}
        with_target = split != "predict"
        pairs = self.training_pairs() if split == "train" else self.read(path, self.source_prefix, with_target)
        encode = PairRows(self.tokenizer, self.max_source_length, self.max_target_length, with_target)
        return {ROWS: tokenize_rows(pair_table(pairs), encode, scratch, self.num_proc, f"tokenizing {split} pairs")}

    def epoch_tokens(self) -> int | None:
        """The pairs' source and target tokens; None for span corruption, whose batches draw their lengths."""
        return None if self.objective == "span_corruption" else super().epoch_tokens()

    @property
    def chunk(self) -> int:
        """Span corruption's chunk size: its corrupted input (+ sentinels, EOS) fits max_source_length."""
        return self.max_source_length - 1

    # --- splits --------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Map the row stores of the splits the stage needs: fit (and validate without val_path) holds out a
        seeded share of the training rows when there is no val_path; span-corruption evaluation rows carry a seed
        that fixes their corruption."""
        stage = str(getattr(stage, "value", stage))
        if self.tokenizer is None:
            self.tokenizer = self.load_run_tokenizer()
        stores = {split: self.view(store) for split, store in self.stores(stage).items()}
        if stage in ("fit", "validate") and "val" not in self.datasets:
            if "val" in stores:
                self.datasets["val"] = self.checked(stores["val"], self.val_path)
                if "train" in stores:
                    self.datasets["train"] = self.checked(stores["train"], "training data")
            else:
                train, val = train_val_split(stores["train"], self.val_fraction, self.seed)
                self.datasets["train"] = self.checked(train, "training data")
                self.datasets["val"] = self.checked(val, "validation split")
            self.datasets["val"] = self.seeded(self.datasets["val"])
        if stage in ("test", "predict"):
            self.datasets[stage] = self.seeded(self.checked(stores[stage], getattr(self, f"{stage}_path")))

    def view(self, store: Store) -> StoreRows:
        """A store's rows: chunks of ids (span corruption), or a pair's ids, texts, record and labels."""
        table = store.table()
        if self.objective == "span_corruption":
            return StoreRows(table)
        return StoreRows(table, json_columns=("record",), columns=[c for c in PAIR_COLUMNS if c in table.column_names])

    def seeded(self, rows: StoreRows) -> StoreRows:
        """Span corruption's evaluation rows, each with a `noise_seed` (its position) that fixes its corruption."""
        return rows.with_hook("noise_seed", PositionSeed("noise_seed")) if self.objective == "span_corruption" else rows

    def checked(self, rows: StoreRows, what: str | None) -> StoreRows:
        """The rows, after one warning counting the sources and targets that were truncated."""
        if self.objective == "span_corruption":
            return rows
        sources = int(rows.column("source_truncated").sum())
        targets = int(rows.column("target_truncated").sum()) if "labels" in rows.columns else 0
        if sources or targets:
            log.warning(
                "%s: truncated %d of %d sources to max_source_length=%d and %d targets to max_target_length=%d tokens",
                what,
                sources,
                len(rows),
                self.max_source_length,
                targets,
                self.max_target_length,
            )
        return rows

    # --- batches -------------------------------------------------------------------------------------
    def collate(self, rows: list[Row]) -> dict[str, Any]:
        """Padded source ids and labels (-100), decoder inputs = labels shifted right after the start token.

        Texts and records stay lists (`source`, `target`, `record`); predict rows have no labels.
        """
        start = decoder_start_token(self.tokenizer)
        if self.objective == "span_corruption":
            corruptor = SpanCorruptor.from_tokenizer(self.tokenizer, **self.noise)
            return SpanCorruptionCollator(corruptor, self.pad_id, start)(rows)
        if "labels" not in rows[0]:
            return super().collate(rows)
        return Seq2SeqCollator(self.pad_id, start)(rows)

    @property
    def pad_id(self) -> int:
        """The tokenizer's pad id (0 without one)."""
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else 0
