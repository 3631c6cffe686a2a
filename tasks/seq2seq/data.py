"""LightningDataModule for sequence-to-sequence: (source, target) pairs -> source ids, labels, shifted decoder ids."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from tasks.seq2seq.reading import Pair, PairFile, read_pairs, read_parallel, read_sources
from tetraformer.data import DataError, read_text
from tetraformer.data.files import resolve_files
from tetraformer.data.records import RecordFormat
from tetraformer.data.seq2seq_batch import Seq2SeqCollator
from tetraformer.data.span_corruption import SpanCorruptionCollator, SpanCorruptor
from tetraformer.data.splits import train_val_split
from tetraformer.data.text import text_format
from tetraformer.data.tokenizer import TokenizerKind, decoder_start_token
from tetraformer.errors import at_least, require
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)
Row = dict[str, Any]  # input_ids, labels (absent when predicting), source, target, record; or input_ids, noise_seed
CORPUS = "tokenizer_corpus.txt"  # RUN_DIR file of both sides' texts the run's tokenizer trains on
Objective = Literal["pairs", "span_corruption"]


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
    """

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
        """Train the run's tokenizer on both sides of the training pairs, unless one is configured or inherited."""
        if self.tokenizer_path or self.init_from:
            return
        if self.objective == "span_corruption":
            texts, extra_ids = self.documents(self.require("train")), self.extra_ids
        else:
            texts, extra_ids = [t for pair in self.training_pairs() for t in (pair.source, pair.target)], 0
        corpus = "".join(text.replace("\n", " ") + "\n" for text in texts)
        self.train_run_tokenizer_on(self.run_dir() / CORPUS, corpus, extra_ids)

    # --- splits --------------------------------------------------------------------------------------
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

    def setup(self, stage: str) -> None:
        """Load the tokenizer and encode the splits the stage needs."""
        if self.tokenizer is None:
            self.tokenizer = self.load_run_tokenizer()
        if self.objective == "span_corruption":
            self._setup_span_corruption(stage)
            return
        if stage in ("fit", "validate") and "val" not in self.datasets:
            if self.val_path:
                self.datasets["val"] = self.encode(self.read(self.val_path, self.source_prefix), self.val_path)
                if stage == "fit":
                    self.datasets["train"] = self.encode(self.training_pairs(), "training data")
            else:
                train, val = train_val_split(self.training_pairs(), self.val_fraction, self.seed)
                self.datasets["train"], self.datasets["val"] = (
                    self.encode(train, "training data"),
                    self.encode(val, "validation split"),
                )
        if stage == "test":
            self.datasets["test"] = self.encode(self.read(self.require("test"), self.source_prefix), self.test_path)
        if stage == "predict":
            pairs = self.read(self.require("predict"), self.source_prefix, with_target=False)
            self.datasets["predict"] = self.encode(pairs, self.predict_path)

    def _setup_span_corruption(self, stage: str) -> None:
        """Chunks of the text files; validation (and test) chunks carry a seed that fixes their corruption."""
        if stage in ("fit", "validate") and "val" not in self.datasets:
            if self.val_path:
                self.datasets["train"], self.datasets["val"] = (
                    self.chunks(self.require("train")),
                    self.chunks(self.val_path),
                )
            else:
                self.datasets["train"], self.datasets["val"] = train_val_split(
                    self.chunks(self.require("train")), self.val_fraction, self.seed
                )
            self.datasets["val"] = [{**row, "noise_seed": i} for i, row in enumerate(self.datasets["val"])]
        if stage == "test":
            self.datasets["test"] = [
                {**row, "noise_seed": i} for i, row in enumerate(self.chunks(self.require("test")))
            ]

    def chunks(self, path: str) -> list[Row]:
        """Token chunks of every text, each short enough that its corrupted input (+ sentinels, EOS) fits."""
        size = self.max_source_length - 1
        ids = self.tokenizer(self.documents(path), add_special_tokens=False)["input_ids"]
        return [{"input_ids": doc[i : i + size]} for doc in ids for i in range(0, len(doc), size)]

    # --- encoding ------------------------------------------------------------------------------------
    def encode(self, pairs: list[Pair], what: str) -> list[Row]:
        """Token rows of pairs; over-long sources and targets truncated (keeping EOS), counted, warned once."""
        sources = self.tokenizer([p.source for p in pairs], add_special_tokens=True)["input_ids"]
        has_targets = pairs[0].target is not None
        targets = self.tokenizer([p.target for p in pairs])["input_ids"] if has_targets else [None] * len(pairs)
        rows, long = [], [0, 0]
        for pair, source, target in zip(pairs, sources, targets, strict=True):
            ids = self._truncate(source, self.max_source_length, long, 0)
            text = pair.source if len(ids) == len(source) else self.tokenizer.decode(ids, skip_special_tokens=True)
            row: Row = {"input_ids": ids, "source": text, "target": pair.target, "record": pair.record}
            if target is not None:
                row["labels"] = self._truncate(self._target_ids(target), self.max_target_length, long, 1)
            rows.append(row)
        if any(long):
            log.warning(
                "%s: truncated %d of %d sources to max_source_length=%d and %d targets to max_target_length=%d tokens",
                what,
                long[0],
                len(pairs),
                self.max_source_length,
                long[1],
                self.max_target_length,
            )
        return rows

    def _target_ids(self, ids: list[int]) -> list[int]:
        """Decoder labels: the target's tokens without a leading BOS (the start token goes first), ending in EOS."""
        if ids and ids[0] == self.tokenizer.bos_token_id:
            ids = ids[1:]
        eos = self.tokenizer.eos_token_id
        return ids if ids and ids[-1] == eos else [*ids, eos]

    def _truncate(self, ids: list[int], limit: int, counts: list[int], slot: int) -> list[int]:
        """At most `limit` ids, keeping a final EOS; counts[slot] counts the truncated rows."""
        if len(ids) <= limit:
            return ids
        counts[slot] += 1
        return [*ids[: limit - 1], ids[-1]] if ids[-1] == self.tokenizer.eos_token_id else ids[:limit]

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
