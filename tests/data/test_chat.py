"""Chat records: checked conversations (bad ones named by file:line), the template, assistant-only labels."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tetraformer.data import IGNORE_INDEX, DataError
from tetraformer.data.chat import (
    DEFAULT_CHAT_TEMPLATE,
    END_OF_TURN,
    ChatRows,
    chat_ready,
    conversation,
    end_of_turn_id,
    prompt_turns,
    render,
    render_prompt,
)
from tetraformer.data.records import iter_records
from tetraformer.data.tokenizer import load_tokenizer, train_tokenizer

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the opposite of hot?"},
    {"role": "assistant", "content": "Cold."},
    {"role": "user", "content": "And of up?"},
    {"role": "assistant", "content": "Down, of course."},
]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small byte-level BPE trained on the chat's texts."""
    root = tmp_path_factory.mktemp("chat_tokenizer")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(m["content"] for m in CHAT) * 4, encoding="utf-8")
    train_tokenizer(corpus, "bpe", 300, root / "tok")
    return root / "tok"


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir: Path) -> Any:
    """The trained tokenizer, made ready to chat."""
    return chat_ready(load_tokenizer(tokenizer_dir))


def records(write: Callable[[str, str], Path], *rows: Any) -> list[list[dict[str, str]]]:
    """The conversations of a JSONL file holding the rows."""
    path = write("chat.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    return [conversation(record) for record in iter_records(path)]


def test_prompt_response_and_messages_records(write: Callable[[str, str], Path]) -> None:
    """Both record shapes give role/content turns; a pair's optional system turn comes first."""
    pair, messages = records(write, {"system": "S", "prompt": "P", "response": "R"}, {"messages": CHAT, "id": 7})
    assert pair == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "P"},
        {"role": "assistant", "content": "R"},
    ]
    assert messages == CHAT


BAD = [
    ({"messages": [{"content": "hi"}, {"role": "assistant", "content": "yo"}]}, "messages[0] has no 'role'"),
    ({"messages": [{"role": "bot", "content": "hi"}]}, "messages[0] has unknown role 'bot'; known roles: system"),
    (
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " "}]},
        "messages[1] content is empty",
    ),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]}, "messages[1] content is missing"),
    ({"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]}, "end with a 'user' turn"),
    ({"messages": []}, "'messages' must be a non-empty array"),
    ({"messages": ["hi"]}, "messages[0] must be an object"),
    ({"prompt": "hi", "response": ""}, "field 'response' is empty"),
    ({"prompt": "hi"}, "field 'response' is missing"),
    ({"prompt": 3, "response": "x"}, "field 'prompt' must be a string, got number"),
    ({"text": "hi"}, "needs 'messages' or 'prompt' and 'response' (keys present: 'text')"),
    (["not", "an", "object"], "expected a JSON object, got array"),
]


@pytest.mark.parametrize(("row", "message"), BAD)
def test_a_bad_record_is_one_line_naming_file_and_line(
    write: Callable[[str, str], Path], row: Any, message: str
) -> None:
    """A good record, then the bad one: the error is one line, at the second line of the file."""
    good = {"prompt": "q", "response": "a"}
    with pytest.raises(DataError) as err:
        records(write, good, row)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"{err.value.path}:2: ") and str(err.value.path).endswith("chat.jsonl")
    assert message in text


def test_labels_are_exactly_the_assistant_turns(tokenizer: Any) -> None:
    """Labelled tokens are the assistant replies with their end-of-turn tokens, in order; all others are ignored."""
    ids, labels = render(tokenizer, CHAT)
    assert len(ids) == len(labels)
    assert tokenizer.decode(ids) == tokenizer.apply_chat_template(CHAT, tokenize=False)
    learned = [i for i, label in zip(ids, labels, strict=True) if label != IGNORE_INDEX]
    assert all(label in (IGNORE_INDEX, i) for i, label in zip(ids, labels, strict=True))
    expected = [
        t
        for m in CHAT
        if m["role"] == "assistant"
        for t in tokenizer.encode(m["content"] + END_OF_TURN, add_special_tokens=False)
    ]
    assert learned == expected
    spans = [i for i, label in enumerate(labels) if label != IGNORE_INDEX]
    assert len(spans) == len(expected)  # no prompt, system or role-header token is labelled


def test_a_generation_prompt_tokenizes_as_in_training(tokenizer: Any) -> None:
    """The prompt generation continues is the start of the training ids, up to the assistant's first reply token."""
    ids, labels = render(tokenizer, CHAT)
    for turn in (2, 4):  # the assistant turns
        prompt = tokenizer(render_prompt(tokenizer, CHAT[:turn]), add_special_tokens=False)["input_ids"]
        assert ids[: len(prompt)] == prompt
        assert labels[len(prompt)] != IGNORE_INDEX and labels[len(prompt) - 1] == IGNORE_INDEX


def test_default_template_and_end_of_turn(tokenizer: Any) -> None:
    """A tokenizer without a template gets ChatML and its two special tokens; a turn ends at <|im_end|>."""
    assert tokenizer.chat_template == DEFAULT_CHAT_TEMPLATE
    assert end_of_turn_id(tokenizer) == tokenizer.convert_tokens_to_ids(END_OF_TURN)
    assert len(tokenizer(END_OF_TURN, add_special_tokens=False)["input_ids"]) == 1
    assert chat_ready(tokenizer) is tokenizer and len(tokenizer) == len(chat_ready(tokenizer))


def test_a_tokenizers_own_template_is_kept(tokenizer: Any) -> None:
    """A template the tokenizer brings renders the conversation; labels still cover the assistant text only."""
    own = (
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant] {% endif %}"
    )
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = own
    assert chat_ready(tokenizer).chat_template == own
    ids, labels = render(tokenizer, CHAT[1:3])
    learned = [i for i, label in zip(ids, labels, strict=True) if label != IGNORE_INDEX]
    assert tokenizer.decode(learned) == "Cold."


def test_end_of_turn_of_other_templates(tokenizer_dir: Path) -> None:
    """A tokenizer with Llama 3's <|eot_id|> (and no <|im_end|>) ends turns there; one with neither at eos."""
    plain = load_tokenizer(tokenizer_dir)
    assert end_of_turn_id(plain) == plain.eos_token_id
    plain.add_special_tokens({"additional_special_tokens": ["<|eot_id|>"]})
    assert end_of_turn_id(plain) == plain.convert_tokens_to_ids("<|eot_id|>")


def test_chat_rows_shift_cut_and_drop(tokenizer: Any) -> None:
    """Store rows are the rendered ids shifted by one against their labels, cut to max_length; a conversation
    whose assistant tokens all fall past the cut is dropped; the prompt is the last user turn."""
    ids, labels = render(tokenizer, CHAT)
    batch = {"messages": [json.dumps(CHAT)] * 2}
    whole = ChatRows(tokenizer, len(ids))(batch)
    assert whole["input_ids"][0] == ids[:-1] and whole["labels"][0] == labels[1:]
    assert whole["cut"] == [False, False] and whole["prompt"][0] == "And of up?"
    first_reply = labels.index(next(label for label in labels if label != IGNORE_INDEX))
    cut = ChatRows(tokenizer, first_reply + 1)(batch)
    assert cut["cut"][0] and len(cut["input_ids"][0]) == len(cut["labels"][0]) == first_reply + 1
    assert ChatRows(tokenizer, first_reply - 1)(batch)["input_ids"] == []  # no assistant token left


def test_predict_records_ask_what_training_records_would(write: Callable[[str, str], Path]) -> None:
    """A predict record: a prompt or text (a plain user turn; after a system turn as a conversation), or messages up
    to the last user turn (a training record's reply is dropped)."""
    rows = [{"prompt": "P"}, {"text": "T"}, {"system": "S", "prompt": "P"}, {"messages": CHAT}]
    path = write("predict.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    plain, text, system, chat = [prompt_turns(record) for record in iter_records(path)]
    assert (plain, text) == ("P", "T")
    assert system == [{"role": "system", "content": "S"}, {"role": "user", "content": "P"}]
    assert chat == CHAT[:-1] and chat[-1]["role"] == "user"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"response": "R"}, "needs 'messages', 'prompt' or 'text' \\(keys present: 'response'\\)"),
        ({"messages": [{"role": "assistant", "content": "A"}]}, "no user turn to answer"),
    ],
)
def test_a_predict_record_without_a_question_names_its_line(
    write: Callable[[str, str], Path], row: dict[str, Any], message: str
) -> None:
    """A record with nothing to answer is a DataError at its file and line."""
    path = write("predict.jsonl", json.dumps({"prompt": "ok"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=f"predict.jsonl:2.*{message}|{message}.*predict.jsonl:2"):
        [prompt_turns(record) for record in iter_records(path)]
