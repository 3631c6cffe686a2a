"""LabelVocabulary: from data (sorted) or fixed (order kept), located errors, multi-hot, state."""

from __future__ import annotations

import pytest
import torch

from tetraformer.data import DataError, LabelVocabulary


def test_from_data_sorts_unique_labels_and_round_trips() -> None:
    """Labels of a training split become sorted unique names; decode(encode(x)) == x."""
    vocab = LabelVocabulary.from_data(["sport", "economy", "sport", "tech"])
    assert vocab.names == ["economy", "sport", "tech"] and len(vocab) == 3
    assert [vocab.encode(x) for x in ("tech", "economy")] == [2, 0]
    assert all(vocab.decode(vocab.encode(x)) == x for x in vocab.names)


def test_fixed_order_is_kept() -> None:
    """A vocabulary given by config keeps its order (ids follow it)."""
    vocab = LabelVocabulary(["neg", "neutral", "pos"])
    assert [vocab.encode(x) for x in ("pos", "neg")] == [2, 0]


def test_unknown_label_names_file_line_and_known_labels() -> None:
    """An unknown label is a DataError at path:line that lists the known labels."""
    vocab = LabelVocabulary(["neg", "pos"])
    with pytest.raises(DataError) as err:
        vocab.encode("positive", path="test.csv", line=7)
    assert str(err.value).startswith("test.csv:7: unknown label 'positive'")
    assert "'neg', 'pos'" in str(err.value)


def test_long_vocabulary_is_shortened_in_errors() -> None:
    """Listing 100 labels would bury the message: the error shows the first ones and a count."""
    vocab = LabelVocabulary([f"L{i:03d}" for i in range(100)])
    with pytest.raises(DataError, match=r"'L019' \(and 80 more\)") as err:
        vocab.encode("nope", path="a.jsonl", line=2)
    assert "'L020'" not in str(err.value)


def test_bad_values_are_located() -> None:
    """Empty or list-valued labels in single-label data are errors at their file and line, or row."""
    with pytest.raises(DataError, match=r"^train\.jsonl:3: empty label"):
        LabelVocabulary.from_data(
            ["a", "b", ""], locations=[("train.jsonl", 1), ("train.jsonl", 2), ("train.jsonl", 3)]
        )
    with pytest.raises(DataError, match=r"^row 2: expected one label"):
        LabelVocabulary.from_data(["a", ["b", "c"]])


def test_duplicates_in_a_fixed_vocabulary_are_an_error() -> None:
    """A configured list that repeats a label would give one name two ids."""
    with pytest.raises(DataError, match="repeats 'a'"):
        LabelVocabulary(["a", "b", "a"])


def test_multi_label_multi_hot() -> None:
    """Lists of labels encode to a multi-hot over the vocabulary (an empty list is all zeros) and back."""
    vocab = LabelVocabulary.from_data([["b", "a"], ["c"], []], multi_label=True)
    assert vocab.names == ["a", "b", "c"]
    assert torch.equal(vocab.encode(["c", "a"]), torch.tensor([1, 0, 1]))
    assert torch.equal(vocab.encode([]), torch.zeros(3, dtype=torch.long))
    assert vocab.decode(torch.tensor([0, 1, 1])) == ["b", "c"]
    with pytest.raises(DataError, match=r"^x\.jsonl:4: unknown label 'd'"):
        vocab.encode(["a", "d"], path="x.jsonl", line=4)
    with pytest.raises(DataError, match="expected a list of labels"):
        vocab.encode("a")


def test_state_is_plain_data_and_restores() -> None:
    """state() holds only lists, strings and bools, and from_state rebuilds the same vocabulary."""
    vocab = LabelVocabulary(["z", "a"], multi_label=True)
    state = vocab.state()
    assert state == {"labels": ["z", "a"], "multi_label": True}
    again = LabelVocabulary.from_state(state)
    assert again.names == ["z", "a"] and again.multi_label


def test_sequences_of_tags_encode_per_token() -> None:
    """A tag sequence (one label per token, as in NER) encodes to ids; an unknown tag names its line."""
    vocab = LabelVocabulary.from_data(tag for tags in [["O", "B-PER"], ["I-PER", "O"]] for tag in tags)
    assert vocab.names == ["B-PER", "I-PER", "O"]
    assert vocab.encode_sequence(["B-PER", "I-PER", "O"]) == [0, 1, 2]
    with pytest.raises(DataError, match=r"^ner\.conll:12: unknown label 'B-LOC'"):
        vocab.encode_sequence(["O", "B-LOC"], path="ner.conll", line=12)
