"""TextDataModule: the options every text task's datamodule shares, the run tokenizer trained from them, and the
stores (data/store.py) their tokenized rows are kept in."""

from __future__ import annotations

import codecs
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, ClassVar

from tetraformer.data.files import resolve_files
from tetraformer.data.run_tokenizer import prepare_run_tokenizer
from tetraformer.data.store import Store, Tables, prepare_store, store_key
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.data.vocab_cap import MIN_COUNT
from tetraformer.errors import at_least, require
from tetraformer.files import write_text_if_changed
from tetraformer.training.base.datamodule import TaskDataModule


class TextDataModule(TaskDataModule):
    """A TaskDataModule over text files: the field holding text, the files' encoding, the run tokenizer's settings.

    `vocab_size` is a ceiling: with `vocab_cap` (the default) a size the training text cannot support (too few
    words it repeats) is capped, with one warning line (data/vocab_cap.py); `--data.vocab_cap false` keeps it.
    `vocab_min_count` is the times the text must show a piece for the cap to count it (default 5).
    `tokenize_chinese_chars` false keeps CJK ideographs inside their words in a WordPiece tokenizer (text already
    split into words, e.g. Japanese morphemes), as BERT's option of that name does. `zero_digits` makes the run
    tokenizer read every digit as 0 (numbers share pieces by length: "23 日" and "19 日" look alike).

    These options, with the TaskDataModule's (paths, tokenizer, batch_size, num_workers, val_fraction, seed), reach
    it through a task's `**kwargs`, so they stay `--data.text_field` etc. A task whose default differs (a
    tokenizer type, a text field of another type) names the option in its own signature and hands it on.

    A task that sets `store_name` keeps each split's tokenized rows in a row store under `cache_dir` (default
    $TETRAFORMER_CACHE_DIR/token_stores, else ~/.cache/tetraformer/token_stores), built once with `num_proc`
    tokenizing processes (1: the fast tokenizer's own threads encode each batch) and reused by every later run
    with the same files, tokenizer and row options. It says what changes its rows (`row_options`) and how to build
    them (`build_rows`).
    """

    store_name: ClassVar[str] = ""  # the prefix of the task's row stores' names ("": the task keeps none)
    token_columns: ClassVar[tuple[str, ...]] = ()  # the stored id lists a batch's real tokens are (epoch_tokens)

    def __init__(
        self,
        text_field: str = "text",
        encoding: str = "utf-8",
        tokenizer_type: TokenizerKind = "wordpiece",
        vocab_size: int = 8000,
        vocab_cap: bool = True,
        vocab_min_count: int = MIN_COUNT,
        tokenize_chinese_chars: bool = True,
        zero_digits: bool = False,
        cache_dir: str | None = None,
        num_proc: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        at_least(self, 1, vocab_size=vocab_size, num_proc=num_proc, vocab_min_count=vocab_min_count)
        require(self, "encoding", encoding, known_encoding(encoding), "must be an encoding Python knows (utf-8, ...)")
        keeps = tokenize_chinese_chars or tokenizer_type == "wordpiece"
        require(self, "tokenize_chinese_chars", tokenize_chinese_chars, keeps, "false needs tokenizer_type wordpiece")
        self.text_field, self.encoding = text_field, encoding
        self.tokenizer_type, self.vocab_size, self.vocab_cap = tokenizer_type, vocab_size, vocab_cap
        self.cache_dir, self.num_proc, self.tokenize_chinese_chars = cache_dir, num_proc, tokenize_chinese_chars
        self.zero_digits, self.vocab_min_count = zero_digits, vocab_min_count
        self._row_stores: dict[tuple[str, str], Store] = {}  # by split and path, once opened in this process

    def train_run_tokenizer(
        self, files: list[Path], field: str | None = None, encoding: str | None = None, extra_ids: int = 0
    ) -> None:
        """Train the run's tokenizer on the files' `text_field` (or `field`), or keep it when its settings and files
        are the same; `extra_ids` reserves T5 sentinels. Rank 0 only (data/run_tokenizer.py records them). A resumed
        fit keeps the tokenizer it trained with (`resume_from`): nothing is trained or written."""
        if self.resumed_from is not None:
            return
        directory, kind, size = self.tokenizer_dir(), self.tokenizer_type, self.vocab_size
        field, encoding = field or self.text_field, encoding or self.encoding
        settings = {"chinese_chars": self.tokenize_chinese_chars, "zero_digits": self.zero_digits}
        settings["min_count"] = self.vocab_min_count
        prepare_run_tokenizer(directory, files, kind, size, field, encoding, extra_ids, self.vocab_cap, **settings)

    def train_run_tokenizer_on(self, corpus: Path, text: str, extra_ids: int = 0) -> None:
        """Train the run's tokenizer on `text`, kept as a UTF-8 corpus file rewritten only when the text changes
        (neither when resuming)."""
        if self.resumed_from is not None:
            return
        write_text_if_changed(corpus, text)
        self.train_run_tokenizer([corpus], "text", "utf-8", extra_ids)

    def epoch_tokens(self) -> int | None:
        """The training rows' `token_columns` lengths, summed from the row store without reading the lists."""
        rows = self.training_rows()
        if not self.token_columns or not hasattr(rows, "lengths"):
            return None
        return sum(int(rows.lengths(column).sum()) for column in self.token_columns)

    def training_rows(self) -> Any:
        """The stored training rows an epoch reads once each (the training dataset, unless it regroups them)."""
        return self.datasets.get("train")

    # --- row stores ----------------------------------------------------------------------------------------
    def stores(self, stage: str) -> dict[str, Any]:
        """The stage's row stores by split: built here when missing by global rank 0 (prepare_data, `tetraformer
        prepare`) or local rank 0 (a node-local cache), mapped by the other ranks once built."""
        if not self.store_name:
            return super().stores(stage)
        if self.tokenizer is None:
            self.tokenizer = self.load_run_tokenizer()
        return {split: self.split_store(split, path) for split, path in self.split_paths(stage).items()}

    def prepare_stores(self) -> None:
        """Build the row stores of the stage the trainer runs (fit without one: `tetraformer prepare`)."""
        self.stores(self.trainer_stage())

    def read_stored_splits(
        self, stage: str, view: Callable[[str, str, Store], Any], into: MutableMapping[str, Any] | None = None
    ) -> None:
        """`read_splits` over the stage's row stores into `into` (the datasets by default): `view(split, path,
        store)` gives the rows of a split."""
        stores = self.stores(stage)
        splits = {(path, split == "predict"): split for split, path in self.split_paths(stage).items()}

        def read(path: str, predict: bool) -> Any:
            split = splits[path, predict]
            return view(split, path, stores[split])

        self.read_splits(stage, self.datasets if into is None else into, read)

    def split_store(self, split: str, path: str) -> Store:
        """The row store of one split's files (opened once per process)."""
        if (split, path) not in self._row_stores:
            files = self.store_files(split, path)
            build_here = self.trainer is None or self.trainer.local_rank == 0
            options = {"task": self.store_name, **self.row_options(split)}
            self._row_stores[split, path] = prepare_store(
                f"{self.store_name}-{split}",
                store_key(files, self.tokenizer, options),
                lambda scratch: self.build_rows(split, path, scratch),
                self.cache_dir,
                build_here,
                len(self.tokenizer) if self.tokenizer is not None else None,
                self.token_columns,
            )
        return self._row_stores[split, path]

    def fit_files(self) -> dict[str, list[Path]]:
        """The files a fit reads, by split: those its stores are built from."""
        return {split: self.store_files(split, path) for split, path in self.split_paths("fit").items()}

    def store_files(self, split: str, path: str) -> list[Path]:
        """The files a split's store is built from, whose identities key it (its path's files by default)."""
        return resolve_files(path)

    def row_options(self, split: str) -> dict[str, Any]:
        """Every option that changes a split's rows (the store's key besides files and tokenizer)."""
        raise NotImplementedError

    def build_rows(self, split: str, path: str, scratch: Path) -> Tables:
        """Read and tokenize a split's path into the store's tables (`tokenize_rows` writes under `scratch`)."""
        raise NotImplementedError


def known_encoding(name: str) -> bool:
    """Whether Python can decode text in this encoding."""
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True
