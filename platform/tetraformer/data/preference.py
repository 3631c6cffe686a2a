"""Preference pairs: a prompt and two replies, the chosen and the rejected, rendered with a chat template into ids and
labels on the replies only.

A record is `{"prompt": ..., "chosen": ..., "rejected": ...}`: the prompt a string (one user turn, after an optional
`"system"`) or a list of messages ending with a user turn; each reply a string, an assistant message, or a list of
messages ending with an assistant turn (TRL's conversational format). Roles and contents are checked as chat records'
are (data/chat.py); a bad record is a DataError at its file and line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import torch

from tetraformer.data.chat import Message, checked_content, checked_message, render
from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.packed_examples import PaddedExamples
from tetraformer.data.records import Record, json_type

SIDES = ("chosen", "rejected")
PAIR_FIELDS = ("prompt", *SIDES)


@dataclass(frozen=True)
class Pair:
    """A checked preference pair: the prompt's messages and each reply's messages."""

    prompt: list[Message]
    chosen: list[Message]
    rejected: list[Message]

    def conversation(self, side: str) -> list[Message]:
        """The prompt followed by the `side` reply."""
        return self.prompt + getattr(self, side)

    def texts(self) -> list[str]:
        """Every role name and content of the pair (what a run tokenizer learns from)."""
        messages = self.prompt + self.chosen + self.rejected
        return [m[key] for m in messages for key in ("role", "content")]


def preference_pair(record: Record) -> Pair:
    """A record's pair, checked; a DataError at the record's file and line says what is wrong."""
    data = record.data
    missing = [name for name in PAIR_FIELDS if name not in data]
    if missing:
        keys = ", ".join(repr(k) for k in data) or "none"
        need = ", ".join(repr(name) for name in missing)
        raise record.error(
            f"a preference record needs 'prompt', 'chosen' and 'rejected'; {need} missing (keys present: {keys})"
        )
    prompt = _prompt(record, data["prompt"], data.get("system"))
    return Pair(prompt, _reply(record, "chosen", data["chosen"]), _reply(record, "rejected", data["rejected"]))


def _prompt(record: Record, prompt: Any, system: Any) -> list[Message]:
    """The prompt's messages: a string is one user turn (after `system`, when given); a list must end with a user."""
    if isinstance(prompt, list):
        messages = _messages(record, "prompt", prompt)
        if messages[-1]["role"] != "user":
            raise record.error(f"'prompt' ends with a {messages[-1]['role']!r} turn: the last must be 'user'")
        return messages
    first = [{"role": "system", "content": checked_content(record, "field 'system'", system)}] if system else []
    return first + [{"role": "user", "content": checked_content(record, "field 'prompt'", prompt)}]


def _reply(record: Record, side: str, reply: Any) -> list[Message]:
    """A reply's messages: a string or an assistant message is one assistant turn; a list must end with one."""
    if isinstance(reply, str | None):
        return [{"role": "assistant", "content": checked_content(record, f"field {side!r}", reply)}]
    messages = _messages(record, side, reply if isinstance(reply, list) else [reply])
    if messages[-1]["role"] != "assistant":
        raise record.error(f"{side!r} ends with a {messages[-1]['role']!r} turn: the last must be 'assistant'")
    return messages


def _messages(record: Record, side: str, messages: list[Any]) -> list[Message]:
    """A field's list of messages, each checked (an error names it as `side[i]`)."""
    if not messages:
        raise record.error(f"{side!r} is an empty array: give a string or messages {{role, content}}")
    if len(messages) == 1 and not isinstance(messages[0], dict):
        raise record.error(f"{side!r} must be a string or messages {{role, content}}, got {json_type(messages[0])}")
    return [checked_message(record, f"{side}[{i}]", m) for i, m in enumerate(messages)]


@dataclass(frozen=True)
class PairRows:
    """Renders a batch of pairs (JSON text of a Pair's fields) into row-store rows: for each side, shifted `_ids` and
    `_labels` of at most `max_length` tokens, labels on the reply's assistant turns only (the prompt's are context);
    `prompt`, the last user turn; `cut` when a side was longer. A pair either side of which keeps no reply token is
    dropped."""

    tokenizer: Any
    max_length: int

    def __call__(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        columns = [f"{side}_{part}" for side in SIDES for part in ("ids", "labels")]
        out: dict[str, list[Any]] = {name: [] for name in [*columns, "prompt", "cut"]}
        kept = self.max_length + 1
        for text in batch["pair"]:
            pair = Pair(**json.loads(text))
            rendered = {side: render(self.tokenizer, pair.conversation(side), len(pair.prompt)) for side in SIDES}
            if any(all(label == IGNORE_INDEX for label in labels[1:kept]) for _, labels in rendered.values()):
                continue
            for side, (ids, labels) in rendered.items():
                out[f"{side}_ids"].append(ids[:kept][:-1])
                out[f"{side}_labels"].append(labels[1:kept])
            out["prompt"].append(next(m["content"] for m in reversed(pair.prompt) if m["role"] == "user"))
            out["cut"].append(any(len(ids) > kept for ids, _ in rendered.values()))
        return out


class PairedExamples:
    """Collator: B pairs -> (2B, T) right-padded `input_ids`, `labels` and `attention_mask`, the B chosen replies
    first, then the B rejected ones in the same order (one forward pass for both)."""

    def __init__(self, pad_id: int) -> None:
        self.pad = PaddedExamples(pad_id)

    def __call__(self, rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        """(2B, T) input_ids, labels and attention_mask."""
        sides = [{"input_ids": r[f"{side}_ids"], "labels": r[f"{side}_labels"]} for side in SIDES for r in rows]
        return self.pad(sides)
