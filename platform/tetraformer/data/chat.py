"""Chat data: conversations from records, rendered with a chat template into ids and assistant-only labels.

A record is `{"prompt": ..., "response": ...}` (optionally `"system"`) or `{"messages": [{"role", "content"}, ...]}`
with roles system/user/assistant, ending with an assistant turn. A tokenizer without a chat template of its own gets
DEFAULT_CHAT_TEMPLATE (ChatML) and its two special tokens, CHAT_TOKENS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.records import Record, json_type

ROLES = ("system", "user", "assistant")
START_OF_TURN, END_OF_TURN = "<|im_start|>", "<|im_end|>"
CHAT_TOKENS = [START_OF_TURN, END_OF_TURN]  # special tokens a run tokenizer gets for the default template
# the end-of-turn tokens of ChatML (Qwen, SmolLM2), Llama 3 and Gemma templates; others end turns with eos
END_OF_TURN_TOKENS = (END_OF_TURN, "<|eot_id|>", "<end_of_turn>")
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
Message = dict[str, str]


def conversation(record: Record) -> list[Message]:
    """A record's messages, checked; a DataError at the record's file and line says what is wrong."""
    data = record.data
    if "messages" in data:
        messages = data["messages"]
        if not isinstance(messages, list) or not messages:
            raise record.error(f"'messages' must be a non-empty array of {{role, content}}, got {json_type(messages)}")
        checked = [checked_message(record, f"messages[{i}]", m) for i, m in enumerate(messages)]
    elif "prompt" in data or "response" in data:
        system = [{"role": "system", "content": data["system"]}] if "system" in data else []
        turns = [
            {"role": "user", "content": data.get("prompt")},
            {"role": "assistant", "content": data.get("response")},
        ]
        checked = [_pair_field(record, m) for m in system + turns]
    else:
        keys = ", ".join(repr(k) for k in data) or "none"
        raise record.error(f"a chat record needs 'messages' or 'prompt' and 'response' (keys present: {keys})")
    if checked[-1]["role"] != "assistant":
        raise record.error(f"the messages end with a {checked[-1]['role']!r} turn: the last must be 'assistant'")
    return checked


def prompt_turns(record: Record) -> str | list[Message]:
    """What a predict record asks the assistant: a `text` or `prompt` string (one user turn, after a `system` if
    any), or `messages` up to the last user turn (a training record's assistant reply is left out)."""
    data = record.data
    if "messages" in data and isinstance(data["messages"], list):
        checked = [checked_message(record, f"messages[{i}]", m) for i, m in enumerate(data["messages"])]
        while checked and checked[-1]["role"] == "assistant":
            checked.pop()
        if not checked or checked[-1]["role"] != "user":
            raise record.error("'messages' has no user turn to answer")
        return checked
    for key in ("prompt", "text"):
        if isinstance(data.get(key), str) and data[key]:
            system = [{"role": "system", "content": data["system"]}] if isinstance(data.get("system"), str) else []
            return system + [{"role": "user", "content": data[key]}] if system else data[key]
    keys = ", ".join(repr(k) for k in data) or "none"
    raise record.error(f"a prompt record needs 'messages', 'prompt' or 'text' (keys present: {keys})")


def checked_message(record: Record, where: str, message: Any) -> Message:
    """One message (`where` names it in an error, e.g. messages[2]): an object with a known role and non-empty
    string content."""
    if not isinstance(message, dict):
        raise record.error(f"{where} must be an object {{role, content}}, got {json_type(message)}")
    if "role" not in message:
        raise record.error(f"{where} has no 'role' (one of {', '.join(ROLES)})")
    role = message["role"]
    if role not in ROLES:
        raise record.error(f"{where} has unknown role {role!r}; known roles: {', '.join(ROLES)}")
    return {"role": role, "content": checked_content(record, f"{where} content", message.get("content"))}


def _pair_field(record: Record, message: dict[str, Any]) -> Message:
    """A turn of a prompt/response record, its field checked."""
    field = {"system": "system", "user": "prompt", "assistant": "response"}[message["role"]]
    return {"role": message["role"], "content": checked_content(record, f"field {field!r}", message["content"])}


def checked_content(record: Record, what: str, content: Any) -> str:
    """A turn's text: a non-empty string (`what` names it in an error)."""
    if content is None:
        raise record.error(f"{what} is missing or null")
    if not isinstance(content, str):
        raise record.error(f"{what} must be a string, got {json_type(content)}")
    if not content.strip():
        raise record.error(f"{what} is empty")
    return content


def chat_ready(tokenizer: Any) -> Any:
    """The tokenizer, given CHAT_TOKENS and DEFAULT_CHAT_TEMPLATE when it has no chat template of its own."""
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.add_special_tokens({"additional_special_tokens": CHAT_TOKENS})
        tokenizer.chat_template = DEFAULT_CHAT_TEMPLATE
    return tokenizer


def with_template(tokenizer: Any, extras: dict[str, Any]) -> Any:
    """The tokenizer with the chat template a DataSpec's extras keep (a checkpoint's tokenizer stores none)."""
    if tokenizer is not None and extras.get("chat_template") and not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = extras["chat_template"]
    return tokenizer


def end_of_turn_id(tokenizer: Any) -> int | None:
    """The token that ends an assistant turn: the first of END_OF_TURN_TOKENS the tokenizer has, else its eos."""
    vocabulary = tokenizer.get_vocab()
    return next((vocabulary[t] for t in END_OF_TURN_TOKENS if t in vocabulary), tokenizer.eos_token_id)


def render_prompt(tokenizer: Any, messages: list[Message]) -> str:
    """The conversation's text up to the start of the assistant's next turn (what generation continues)."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def render(tokenizer: Any, messages: list[Message], learn_from: int = 0) -> tuple[list[int], list[int]]:
    """The conversation's ids and labels: each assistant turn's tokens (through its end-of-turn token) as they are,
    every other token IGNORE_INDEX; assistant turns before message `learn_from` are context, not learned (a
    preference pair's prompt history).

    The template renders the conversation up to each assistant turn (with the generation prompt) and through it;
    the pieces between are tokenized one by one, so a generation prompt tokenizes as in training.
    """
    ids: list[int] = []
    labels: list[int] = []
    done = ""
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or i < learn_from:
            continue
        before = render_prompt(tokenizer, messages[:i])
        through = tokenizer.apply_chat_template(messages[: i + 1], tokenize=False)
        if not (before.startswith(done) and through.startswith(before)):
            raise ValueError("the chat template does not render a conversation's start as a prefix of it")
        reply = through[len(before) :].rstrip()  # whitespace after the end-of-turn token is not the reply
        _extend(tokenizer, before[len(done) :], ids, labels, learn=False)
        _extend(tokenizer, reply, ids, labels, learn=True)
        done = before + reply
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    _extend(tokenizer, full[len(done) :], ids, labels, learn=False)
    return ids, labels


def _extend(tokenizer: Any, text: str, ids: list[int], labels: list[int], learn: bool) -> None:
    """Append a piece's tokens, labelled with themselves when learned, else IGNORE_INDEX."""
    if not text:
        return
    piece = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids.extend(piece)
    labels.extend(piece if learn else [IGNORE_INDEX] * len(piece))


@dataclass(frozen=True)
class ChatRows:
    """Renders a batch of conversations (JSON text) into row-store rows: shifted `input_ids` and `labels` of at most
    `max_length` tokens (`cut` says a conversation was longer), and `prompt`, its last user turn (empty without
    one). A conversation left with no assistant token is dropped."""

    tokenizer: Any
    max_length: int

    def __call__(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {"input_ids": [], "labels": [], "prompt": [], "cut": []}
        for text in batch["messages"]:
            messages = json.loads(text)
            ids, labels = render(self.tokenizer, messages)
            kept = self.max_length + 1
            if all(label == IGNORE_INDEX for label in labels[1:kept]):
                continue
            out["input_ids"].append(ids[:kept][:-1])
            out["labels"].append(labels[1:kept])
            out["prompt"].append(next((m["content"] for m in reversed(messages) if m["role"] == "user"), ""))
            out["cut"].append(len(ids) > kept)
        return out
