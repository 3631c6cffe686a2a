"""Preference pairs: checked records (bad ones named by file:line), replies labelled alone, chosen-then-rejected
batches."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tetraformer.data import IGNORE_INDEX, DataError
from tetraformer.data.chat import END_OF_TURN, chat_ready, render
from tetraformer.data.preference import PairedExamples, PairRows, preference_pair
from tetraformer.data.records import iter_records
from tetraformer.data.tokenizer import load_tokenizer, train_tokenizer

HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the opposite of hot?"},
    {"role": "assistant", "content": "Cold."},
    {"role": "user", "content": "And of up?"},
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A small byte-level BPE of the history's texts, ready to chat (ChatML)."""
    root = tmp_path_factory.mktemp("pair_tokenizer")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(m["content"] for m in HISTORY) * 4 + "\nDown. Up, of course.", encoding="utf-8")
    train_tokenizer(corpus, "bpe", 300, root / "tok")
    return chat_ready(load_tokenizer(root / "tok"))


def pairs(write: Callable[[str, str], Path], *rows: Any) -> list[Any]:
    """The checked pairs of a JSONL file holding the rows."""
    path = write("pairs.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    return [preference_pair(record) for record in iter_records(path)]


def test_string_and_message_records(write: Callable[[str, str], Path]) -> None:
    """Strings are one user turn (after a system turn) and one assistant reply; messages are taken as they are, a
    single assistant message as a one-turn reply."""
    plain, chat = pairs(
        write,
        {"system": "Be brief.", "prompt": "Hi", "chosen": "Hello!", "rejected": "Go away."},
        {
            "prompt": HISTORY,
            "chosen": {"role": "assistant", "content": "Down."},
            "rejected": [{"role": "assistant", "content": "Up."}],
        },
    )
    assert plain.prompt == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert plain.chosen == [{"role": "assistant", "content": "Hello!"}]
    assert chat.conversation("rejected") == [*HISTORY, {"role": "assistant", "content": "Up."}]


BAD = [
    ({"prompt": "q", "chosen": "a"}, "needs 'prompt', 'chosen' and 'rejected'; 'rejected' missing"),
    ({"prompt": "q", "chosen": "", "rejected": "b"}, "field 'chosen' is empty"),
    ({"prompt": None, "chosen": "a", "rejected": "b"}, "field 'prompt' is missing or null"),
    ({"prompt": "q", "chosen": "a", "rejected": 3}, "'rejected' must be a string or messages {role, content}"),
    ({"prompt": HISTORY[:3], "chosen": "a", "rejected": "b"}, "'prompt' ends with a 'assistant' turn"),
    ({"prompt": [{"role": "bot", "content": "x"}], "chosen": "a", "rejected": "b"}, "prompt[0] has unknown role"),
    ({"prompt": "q", "chosen": {"role": "user", "content": "a"}, "rejected": "b"}, "'chosen' ends with a 'user'"),
    ({"prompt": "q", "chosen": [], "rejected": "b"}, "'chosen' is an empty array"),
]


@pytest.mark.parametrize(("row", "message"), BAD)
def test_a_bad_record_is_one_line_naming_file_and_line(
    write: Callable[[str, str], Path], row: Any, message: str
) -> None:
    """A good pair, then the bad one: the error is one line, at the second line of the file."""
    good = {"prompt": "q", "chosen": "a", "rejected": "b"}
    with pytest.raises(DataError) as err:
        pairs(write, good, row)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"{err.value.path}:2: ") and str(err.value.path).endswith("pairs.jsonl")
    assert message in text


def test_rows_label_only_the_replies(tokenizer: Any) -> None:
    """Each side's row is the prompt then its reply, shifted by one against its labels; only the reply (with its
    end-of-turn token) is labelled, not the prompt's earlier assistant turn; the prompt is the last user turn."""
    pair = {
        "prompt": HISTORY,
        "chosen": [{"role": "assistant", "content": "Down."}],
        "rejected": [{"role": "assistant", "content": "Up, of course."}],
    }
    rows = PairRows(tokenizer, 200)({"pair": [json.dumps(pair)]})
    assert rows["prompt"] == ["And of up?"] and rows["cut"] == [False]
    for side, reply in (("chosen", "Down."), ("rejected", "Up, of course.")):
        ids, labels = rows[f"{side}_ids"][0], rows[f"{side}_labels"][0]
        full, _ = render(tokenizer, HISTORY + pair[side])
        assert ids == full[:-1] and len(labels) == len(ids)
        learned = [label for label in labels if label != IGNORE_INDEX]
        assert learned == tokenizer.encode(reply + END_OF_TURN, add_special_tokens=False)
        at = [i for i, label in enumerate(labels) if label != IGNORE_INDEX]
        assert at == list(range(at[0], at[0] + len(at)))  # one span: the reply, at the end of the row


def test_a_cut_reply_and_a_dropped_pair(tokenizer: Any) -> None:
    """Sides longer than max_length are cut (and said to be); a pair one reply of which loses every token is
    dropped."""
    pair = json.dumps({"prompt": HISTORY[1:2], "chosen": [HISTORY[2]], "rejected": [HISTORY[2]]})
    ids, labels = render(tokenizer, HISTORY[1:3])
    first = labels.index(next(label for label in labels if label != IGNORE_INDEX))
    cut = PairRows(tokenizer, first + 1)({"pair": [pair]})
    assert cut["cut"] == [True] and len(cut["chosen_ids"][0]) == first + 1
    assert PairRows(tokenizer, first - 1)({"pair": [pair]})["chosen_ids"] == []


def test_a_batch_is_the_chosen_rows_then_the_rejected() -> None:
    """B pairs make 2B right-padded rows: the chosen replies in order, then the rejected ones."""
    rows = [
        {"chosen_ids": [1, 2], "chosen_labels": [2, 3], "rejected_ids": [1], "rejected_labels": [4]},
        {"chosen_ids": [5], "chosen_labels": [6], "rejected_ids": [5, 7, 8], "rejected_labels": [-100, 8, 9]},
    ]
    batch = PairedExamples(pad_id=0)(rows)
    assert batch["input_ids"].tolist() == [[1, 2, 0], [5, 0, 0], [1, 0, 0], [5, 7, 8]]
    assert batch["labels"].tolist() == [[2, 3, -100], [6, -100, -100], [4, -100, -100], [-100, 8, 9]]
    assert batch["attention_mask"].sum(-1).tolist() == [2, 1, 1, 3]
