"""TextDataModule: the options every text task's datamodule shares, and the run tokenizer trained from them."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

from tetraformer.data.run_tokenizer import prepare_run_tokenizer
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.errors import at_least, require
from tetraformer.files import write_text_if_changed
from tetraformer.training.base.datamodule import TaskDataModule


class TextDataModule(TaskDataModule):
    """A TaskDataModule over text files: the field holding text, the files' encoding, the run tokenizer's settings.

    These options, with the TaskDataModule's (paths, tokenizer, batch_size, num_workers, val_fraction, seed), reach
    it through a task's `**kwargs`, so they stay `--data.text_field` etc. A task whose default differs (a
    tokenizer type, a text field of another type) names the option in its own signature and hands it on.
    """

    def __init__(
        self,
        text_field: str = "text",
        encoding: str = "utf-8",
        tokenizer_type: TokenizerKind = "wordpiece",
        vocab_size: int = 8000,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        at_least(self, 1, vocab_size=vocab_size)
        require(self, "encoding", encoding, known_encoding(encoding), "must be an encoding Python knows (utf-8, ...)")
        self.text_field, self.encoding = text_field, encoding
        self.tokenizer_type, self.vocab_size = tokenizer_type, vocab_size

    def train_run_tokenizer(
        self, files: list[Path], field: str | None = None, encoding: str | None = None, extra_ids: int = 0
    ) -> None:
        """Train the run's tokenizer on the files' `text_field` (or `field`), or keep it when its settings and files
        are the same; `extra_ids` reserves T5 sentinels. Rank 0 only (data/run_tokenizer.py records them)."""
        directory, kind, size = self.tokenizer_dir(), self.tokenizer_type, self.vocab_size
        field, encoding = field or self.text_field, encoding or self.encoding
        prepare_run_tokenizer(directory, files, kind, size, field, encoding, extra_ids=extra_ids)

    def train_run_tokenizer_on(self, corpus: Path, text: str, extra_ids: int = 0) -> None:
        """Train the run's tokenizer on `text`, kept as a UTF-8 corpus file rewritten only when the text changes."""
        write_text_if_changed(corpus, text)
        self.train_run_tokenizer([corpus], "text", "utf-8", extra_ids)


def known_encoding(name: str) -> bool:
    """Whether Python can decode text in this encoding."""
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True
