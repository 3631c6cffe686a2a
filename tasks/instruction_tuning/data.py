"""LightningDataModule for instruction tuning: chat JSONL -> the chat template -> ids with assistant-only labels."""

from __future__ import annotations

import logging
from typing import Any, Literal

from tetraformer.data import read_text, resolve_files
from tetraformer.data.chat import Message, chat_ready, conversation, render, with_template
from tetraformer.data.errors import DataError
from tetraformer.data.packed_examples import Example, PackedBins, PackedExamples, PaddedExamples
from tetraformer.data.records import RecordFormat, iter_records
from tetraformer.data.spec import DataSpec
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.errors import at_least
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)
CORPUS = "tokenizer_corpus.txt"  # RUN_DIR file of the conversations' texts the run's tokenizer trains on
Batching = Literal["padded", "packed"]


class InstructionTuningData(TextDataModule):
    """Conversations from JSONL/JSON records (`{prompt, response}` or `{messages: [{role, content}, ...]}`).

    Each conversation is rendered with the tokenizer's chat template (data/chat.py: the default ChatML template and
    its special tokens when it has none) and labelled on assistant tokens only. `batching: padded` pads each batch
    to its longest example; `packed` lays several examples end to end in rows of `max_length` tokens (best-fit
    decreasing), positions restarting and attention kept inside each example. Examples longer than `max_length`
    are cut (counted in a warning); one with no assistant token left is dropped. The first `samples`
    validation conversations' last user turns are continued at each validation. The TextDataModule options
    (paths, tokenizer, vocab_size, batch_size, ...) pass through `**kwargs`; predict reads one prompt per line.
    """

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
        self._conversations: dict[str, list[list[Message]]] = {}

    def sequence_length(self) -> tuple[str, int]:
        """The longest sequence a batch holds, and the option that sets it."""
        return "--data.max_length", self.max_length

    def spec_fields(self) -> dict[str, Any]:
        """The chat template (a checkpoint's tokenizer keeps no template) and the validation sample prompts."""
        val = self._conversations.get("val", [])[: self.n_samples]
        prompts = [next(m["content"] for m in reversed(c) if m["role"] == "user") for c in val if _has_user(c)]
        return {"extras": {"chat_template": self.tokenizer.chat_template, "sample_prompts": prompts}}

    def use_spec(self, spec: DataSpec) -> None:
        """Read data as a checkpoint's spec says, its tokenizer given back the chat template the spec keeps."""
        super().use_spec(spec)
        with_template(self.tokenizer, dict(spec.extras))

    def load_run_tokenizer(self) -> Any:
        """The run's tokenizer, ready to render chats (data/chat.py's chat_ready)."""
        return chat_ready(super().load_run_tokenizer())

    def prepare_data(self) -> None:
        """Train the run's tokenizer on the training conversations' texts unless one is configured or inherited."""
        if not (self.tokenizer_path or self.init_from):
            texts = [
                m[key] for c in self.conversations(self.require("train")) for m in c for key in ("role", "content")
            ]
            corpus = "".join(text.replace("\n", " ") + "\n" for text in texts)
            self.train_run_tokenizer_on(self.run_dir() / CORPUS, corpus)

    def conversations(self, path: str) -> list[list[Message]]:
        """The checked conversations of a path's files (a DataError names a bad record's file and line)."""
        return [
            conversation(r) for file in resolve_files(path) for r in iter_records(file, self.format, (), self.encoding)
        ]

    def setup(self, stage: str) -> None:
        """Read, render and split the conversations the stage needs; predict reads prompts, one per line."""
        stage = str(getattr(stage, "value", stage))
        if self.tokenizer is None:
            self.tokenizer = self.load_run_tokenizer()
        if stage == "predict":
            rows = read_text(self.require("predict"), documents="line", encoding=self.encoding)
            self.datasets["predict"] = list(rows["text"])
            return
        self.read_splits(stage, self._conversations, lambda path, _: self.conversations(path))
        for split, chats in self._conversations.items():
            if split not in self.datasets:
                self.datasets[split] = self.batches(self.examples(chats, split))

    def examples(self, chats: list[list[Message]], split: str) -> list[Example]:
        """Shifted (input_ids, labels) of each conversation, cut to max_length; those left with no label dropped."""
        examples, cut = [], 0
        for messages in chats:
            ids, labels = render(self.tokenizer, messages)
            cut += len(ids) > self.max_length + 1
            ids, labels = ids[: self.max_length + 1], labels[: self.max_length + 1]
            if any(label >= 0 for label in labels[1:]):
                examples.append({"input_ids": ids[:-1], "labels": labels[1:]})
        if cut:
            log.warning(
                "%s: cut %d of %d conversations to --data.max_length %d", split, cut, len(chats), self.max_length
            )
        if len(examples) < len(chats):
            log.warning("%s: dropped %d conversations with no assistant token left", split, len(chats) - len(examples))
        if not examples:
            raise DataError(f"{split}: no conversation keeps an assistant token within --data.max_length")
        return examples

    def batches(self, examples: list[Example]) -> Any:
        """The examples as they are (padded batches) or in bins of max_length tokens (packed)."""
        return PackedBins(examples, self.max_length) if self.batching == "packed" else examples

    def collate(self, rows: list[Any]) -> dict[str, Any]:
        """Padded or packed batches; predict batches are lists of prompts."""
        if isinstance(rows[0], str):
            return {"prompts": rows}
        pad_id = self.tokenizer.pad_token_id or 0
        return (PackedExamples if self.batching == "packed" else PaddedExamples)(pad_id)(rows)


def _has_user(messages: list[Message]) -> bool:
    """Whether a conversation has a user turn."""
    return any(m["role"] == "user" for m in messages)
