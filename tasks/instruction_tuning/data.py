"""LightningDataModule for instruction tuning: chat JSONL -> the chat template -> ids with assistant-only labels."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Literal

from tetraformer.data.chat import ChatRows, Message, conversation
from tetraformer.data.errors import DataError
from tetraformer.data.packed_examples import PackedBins, PackedExamples, PaddedExamples
from tetraformer.data.records import Record, RecordFormat
from tetraformer.data.store import ROWS, Tables, tokenize_rows
from tetraformer.data.store_rows import StoreRows
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.training.base.chat_datamodule import ChatDataModule, is_prompt

log = logging.getLogger(__name__)
Batching = Literal["padded", "packed"]


class InstructionTuningData(ChatDataModule):
    """Conversations from JSONL/JSON records (`{prompt, response}` or `{messages: [{role, content}, ...]}`).

    Each conversation is rendered with the tokenizer's chat template (ChatDataModule: the default ChatML template
    and its special tokens when it has none) and labelled on assistant tokens only, once, into a row store under
    `cache_dir` reused by later runs. `batching: padded` pads each batch to its longest example; `packed` lays
    several examples end to end in rows of `max_length` tokens (best-fit decreasing), positions restarting and
    attention kept inside each example. Examples longer than `max_length` are cut (counted in a warning); one with
    no assistant token left is dropped. The first `samples` validation conversations' last user turns are answered
    at each validation. The TextDataModule options (paths, tokenizer, vocab_size, batch_size, cache_dir, num_proc,
    ...) pass through `**kwargs`; predict reads one prompt per line.
    """

    store_name = "chat"
    token_columns = ("input_ids",)
    example_columns = ("input_ids", "labels")

    def __init__(
        self,
        format: RecordFormat | None = None,  # noqa: A002 - None: from the suffix
        max_length: int = 256,
        batching: Batching = "padded",
        samples: int = 2,
        tokenizer_type: TokenizerKind = "bpe",
        **kwargs: Any,
    ) -> None:
        super().__init__(format=format, max_length=max_length, samples=samples, tokenizer_type=tokenizer_type, **kwargs)
        self.save_hyperparameters()
        self.batching = batching

    def record_texts(self, record: Record) -> list[str]:
        """A conversation's roles and contents."""
        return [m[key] for m in conversation(record) for key in ("role", "content")]

    def conversations(self, path: str) -> list[list[Message]]:
        """The checked conversations of a path's files (a DataError names a bad record's file and line)."""
        return [conversation(r) for r in self.records(path)]

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
