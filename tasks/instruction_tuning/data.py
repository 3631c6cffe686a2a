"""LightningDataModule for instruction tuning: chat JSONL -> the chat template -> ids with assistant-only labels."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Literal

from tetraformer.data import read_text, resolve_files
from tetraformer.data.chat import ChatRows, Message, chat_ready, conversation, prompt_turns, with_template
from tetraformer.data.errors import DataError
from tetraformer.data.packed_examples import PackedBins, PackedExamples, PaddedExamples
from tetraformer.data.records import SUFFIX_FORMATS, RecordFormat, iter_records
from tetraformer.data.spec import DataSpec
from tetraformer.data.splits import train_val_split
from tetraformer.data.store import ROWS, Store, Tables, tokenize_rows
from tetraformer.data.store_rows import StoreRows
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.errors import at_least
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)
CORPUS = "tokenizer_corpus.txt"  # RUN_DIR file of the conversations' texts the run's tokenizer trains on
EXAMPLE_COLUMNS = ["input_ids", "labels"]  # what a batch reads of a stored row
Batching = Literal["padded", "packed"]


class InstructionTuningData(TextDataModule):
    """Conversations from JSONL/JSON records (`{prompt, response}` or `{messages: [{role, content}, ...]}`).

    Each conversation is rendered with the tokenizer's chat template (data/chat.py: the default ChatML template and
    its special tokens when it has none) and labelled on assistant tokens only, once, into a row store under
    `cache_dir` reused by later runs. `batching: padded` pads each batch to its longest example; `packed` lays
    several examples end to end in rows of `max_length` tokens (best-fit decreasing), positions restarting and
    attention kept inside each example. Examples longer than `max_length` are cut (counted in a warning); one with
    no assistant token left is dropped. The first `samples` validation conversations' last user turns are answered
    at each validation. The TextDataModule options (paths, tokenizer, vocab_size, batch_size, cache_dir, num_proc,
    ...) pass through `**kwargs`; predict reads one prompt per line.
    """

    store_name = "chat"
    token_columns = ("input_ids",)

    def __init__(
        self,
        format: RecordFormat | None = None,  # noqa: A002 - None: from the suffix
        max_length: int = 256,
        batching: Batching = "padded",
        samples: int = 2,
        tokenizer_type: TokenizerKind = "bpe",
        **kwargs: Any,
    ) -> None:
        super().__init__(tokenizer_type=tokenizer_type, **kwargs)
        at_least(self, 2, max_length=max_length)
        at_least(self, 0, samples=samples)
        self.save_hyperparameters()
        self.format, self.max_length, self.batching, self.n_samples = format, max_length, batching, samples
        self._rows: dict[str, StoreRows] = {}

    def sequence_length(self) -> tuple[str, int]:
        """The longest sequence a batch holds, and the option that sets it."""
        return "--data.max_length", self.max_length

    def spec_fields(self) -> dict[str, Any]:
        """The chat template (a checkpoint's tokenizer keeps no template) and the validation sample prompts."""
        val = self._rows.get("val")
        prompts = [] if val is None else [p for p in val.column("prompt")[: self.n_samples].tolist() if p]
        return {"extras": {"chat_template": self.tokenizer.chat_template, "sample_prompts": prompts}}

    def use_spec(self, spec: DataSpec) -> None:
        """Read data as a checkpoint's spec says, its tokenizer given back the chat template the spec keeps."""
        super().use_spec(spec)
        with_template(self.tokenizer, dict(spec.extras))

    def load_run_tokenizer(self) -> Any:
        """The run's tokenizer, ready to render chats (data/chat.py's chat_ready)."""
        return chat_ready(super().load_run_tokenizer())

    def prepare_data(self) -> None:
        """Train the run's tokenizer on the training conversations' texts unless one is configured or inherited;
        build the stage's row stores."""
        if not (self.tokenizer_path or self.init_from):
            texts = [
                m[key] for c in self.conversations(self.require("train")) for m in c for key in ("role", "content")
            ]
            corpus = "".join(text.replace("\n", " ") + "\n" for text in texts)
            self.train_run_tokenizer_on(self.run_dir() / CORPUS, corpus)
        self.prepare_stores()

    def prompts(self, path: str) -> list[str | list[Message]]:
        """Predict inputs: JSON/JSONL records (a prompt, or a conversation up to its last user turn, as training
        files hold them), else one prompt per line of text."""
        files = resolve_files(path)
        if all(Path(f).suffix.lower() in SUFFIX_FORMATS for f in files):
            return [prompt_turns(r) for f in files for r in iter_records(f, self.format, (), self.encoding)]
        return list(read_text(path, documents="line", encoding=self.encoding)["text"])

    def conversations(self, path: str) -> list[list[Message]]:
        """The checked conversations of a path's files (a DataError names a bad record's file and line)."""
        return [
            conversation(r) for file in resolve_files(path) for r in iter_records(file, self.format, (), self.encoding)
        ]

    # --- row stores ----------------------------------------------------------------------------------
    def split_paths(self, stage: str) -> dict[str, str]:
        """The base's splits; predict reads prompts from text, not a store."""
        paths = super().split_paths(stage)
        return {} if str(getattr(stage, "value", stage)) == "predict" else paths

    def row_options(self, split: str) -> dict[str, Any]:
        """What changes a split's rows besides files and tokenizer: how records are read, the template, the cut."""
        template = self.tokenizer.chat_template
        return {"format": self.format, "encoding": self.encoding, "template": template, "max_length": self.max_length}

    def build_rows(self, split: str, path: str, scratch: Path) -> Tables:
        """The split's conversations rendered into shifted ids and labels (data/chat.py's ChatRows)."""
        from datasets import Dataset

        chats = self.conversations(path)
        table = Dataset.from_dict({"messages": [json.dumps(c, ensure_ascii=False) for c in chats]})
        rows = tokenize_rows(
            table, ChatRows(self.tokenizer, self.max_length), scratch, self.num_proc, f"rendering {split}"
        )
        cut = sum(rows["cut"])
        if cut:
            log.warning(
                "%s: cut %d of %d conversations to --data.max_length %d", split, cut, len(chats), self.max_length
            )
        if len(rows) < len(chats):
            log.warning("%s: dropped %d conversations with no assistant token left", split, len(chats) - len(rows))
        if not len(rows):
            raise DataError(
                f"no conversation keeps an assistant token within --data.max_length {self.max_length}", path
            )
        return {ROWS: rows}

    # --- splits and batches --------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Map the stage's row stores (fit without val_path holds out a seeded share of the training rows); predict
        reads prompts, one per line."""
        stage = str(getattr(stage, "value", stage))
        if self.tokenizer is None:
            self.tokenizer = self.load_run_tokenizer()
        if stage == "predict":
            self.datasets["predict"] = self.prompts(self.require("predict"))
            return
        stores = {split: self.view(store) for split, store in self.stores(stage).items()}
        if stage in ("fit", "validate") and "val" not in self._rows:
            if "val" in stores:
                self._rows["val"] = stores["val"]
                if "train" in stores:
                    self._rows["train"] = stores["train"]
            else:
                self._rows["train"], self._rows["val"] = train_val_split(stores["train"], self.val_fraction, self.seed)
        if stage == "test":
            self._rows["test"] = stores["test"]
        for split, rows in self._rows.items():
            if split not in self.datasets:
                self.datasets[split] = self.batches(rows)

    def training_rows(self) -> StoreRows | None:
        """The training examples, padded or packed into bins: each is read once an epoch."""
        return self._rows.get("train")

    def view(self, store: Store) -> StoreRows:
        """A store's rows: shifted ids and labels (the prompt and cut columns are read only by `column`)."""
        return StoreRows(store.table(), columns=EXAMPLE_COLUMNS)

    def batches(self, rows: StoreRows) -> Any:
        """The examples as they are (padded batches) or in bins of max_length tokens (packed)."""
        if self.batching != "packed":
            return rows
        return PackedBins(rows, self.max_length, rows.lengths("input_ids").tolist())

    def collate(self, rows: list[Any]) -> dict[str, Any]:
        """Padded or packed batches; predict batches are lists of prompts."""
        if is_prompt(rows[0]):
            return {"prompts": rows}
        pad_id = self.tokenizer.pad_token_id or 0
        return (PackedExamples if self.batching == "packed" else PaddedExamples)(pad_id)(rows)


def is_prompt(row: Any) -> bool:
    """Whether a loader row is one of predict's prompts (a text, or a conversation's turns), not a training example
    or a packed bin of them."""
    return isinstance(row, str) or (isinstance(row, list) and all(isinstance(m, dict) and "role" in m for m in row))
