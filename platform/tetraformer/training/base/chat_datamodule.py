"""ChatDataModule: the data side every chat task shares (instruction tuning, preference tuning): records read into
a row store through the chat template, a held-out split, the template and validation prompts in the DataSpec."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tetraformer.data import read_text, resolve_files
from tetraformer.data.chat import Message, chat_ready, prompt_turns, with_template
from tetraformer.data.records import SUFFIX_FORMATS, Record, RecordFormat, iter_records
from tetraformer.data.spec import DataSpec
from tetraformer.data.splits import train_val_split
from tetraformer.data.store import Store
from tetraformer.data.store_rows import StoreRows
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.errors import at_least
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint
from tetraformer.training.base.text_datamodule import TextDataModule
from tetraformer.training.checkpointing.stored_spec import stored_spec

CORPUS = "tokenizer_corpus.txt"  # RUN_DIR file of the records' texts the run's tokenizer trains on


class ChatDataModule(TextDataModule):
    """JSONL/JSON chat records rendered with the tokenizer's chat template (data/chat.py: ChatML and its special
    tokens when it has none) into a row store under `cache_dir`, once, reused by later runs.

    Without `val_path` a fit holds out a seeded `val_fraction` of the training rows. Rows are cut to `max_length`
    tokens. The first `samples` validation rows' last user turns are answered at each validation (the rows' `prompt`
    column). A `--model.init_from` checkpoint gives its tokenizer back the chat template its DataSpec keeps. The
    TextDataModule options pass through `**kwargs`; predict reads prompts (records, or one per line of text).

    A task says how its records read (`record_texts`: the strings a run tokenizer trains on), which columns a batch
    reads of a stored row (`example_columns`), and builds its rows (`row_options`, `build_rows`).
    """

    example_columns: tuple[str, ...] = ()  # what a batch reads of a stored row

    def __init__(
        self,
        format: RecordFormat | None = None,  # noqa: A002 - None: from the suffix
        max_length: int = 256,
        samples: int = 2,
        tokenizer_type: TokenizerKind = "bpe",
        **kwargs: Any,
    ) -> None:
        super().__init__(tokenizer_type=tokenizer_type, **kwargs)
        at_least(self, 2, max_length=max_length)
        at_least(self, 0, samples=samples)
        self.format, self.max_length, self.n_samples = format, max_length, samples
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
        """The run's tokenizer, ready to render chats (data/chat.py's chat_ready); an init_from checkpoint's with the
        template its spec keeps."""
        if self.init_from and not self.tokenizer_path and Path(self.init_from).is_file():
            spec = stored_spec(read_checkpoint(self.init_from)[PAYLOAD_KEY])
            if spec.tokenizer is not None:
                return chat_ready(with_template(spec.tokenizer, dict(spec.extras)))
        return chat_ready(super().load_run_tokenizer())

    def prepare_data(self) -> None:
        """Train the run's tokenizer on the training records' texts unless one is configured or inherited; build the
        stage's row stores."""
        if not (self.tokenizer_path or self.init_from):
            texts = (text for record in self.records(self.require("train")) for text in self.record_texts(record))
            corpus = "".join(text.replace("\n", " ") + "\n" for text in texts)
            self.train_run_tokenizer_on(self.run_dir() / CORPUS, corpus)
        self.prepare_stores()

    def records(self, path: str) -> Iterable[Record]:
        """The records of a path's files (a file, a directory or a glob)."""
        return (r for file in resolve_files(path) for r in iter_records(file, self.format, (), self.encoding))

    def record_texts(self, record: Record) -> list[str]:
        """The strings of a checked record a run tokenizer learns from (role names too)."""
        raise NotImplementedError

    def prompts(self, path: str) -> list[str | list[Message]]:
        """Predict inputs: JSON/JSONL records (a prompt, or a conversation up to its last user turn, as training
        files hold them), else one prompt per line of text."""
        files = resolve_files(path)
        if all(Path(f).suffix.lower() in SUFFIX_FORMATS for f in files):
            return [prompt_turns(r) for r in self.records(path)]
        return list(read_text(path, documents="line", encoding=self.encoding)["text"])

    # --- row stores and splits -------------------------------------------------------------------------
    def split_paths(self, stage: str) -> dict[str, str]:
        """The base's splits; predict reads prompts, not a store."""
        paths = super().split_paths(stage)
        return {} if str(getattr(stage, "value", stage)) == "predict" else paths

    def setup(self, stage: str) -> None:
        """Map the stage's row stores (fit without val_path holds out a seeded share of the training rows); predict
        reads prompts."""
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
        """The training rows: each is read once an epoch."""
        return self._rows.get("train")

    def view(self, store: Store) -> StoreRows:
        """A store's rows as a batch reads them (the prompt and cut columns are read only by `column`)."""
        return StoreRows(store.table(), columns=list(self.example_columns))

    def batches(self, rows: StoreRows) -> Any:
        """The dataset a loader reads of a split's rows (the rows themselves by default)."""
        return rows


def is_prompt(row: Any) -> bool:
    """Whether a loader row is one of predict's prompts (a text, or a conversation's turns), not a training example
    or a packed bin of them."""
    return isinstance(row, str) or (isinstance(row, list) and all(isinstance(m, dict) and "role" in m for m in row))
