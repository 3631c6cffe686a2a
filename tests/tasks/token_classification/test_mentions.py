"""Mention replacement: copies keep every sentence's context words and its number of entities; entities are swapped
for training entities of the same type, about as often as asked; the training store holds the copies, the other
splits do not."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tasks.token_classification.mentions import mention_pool, replaced_copies
from tests.tasks.token_classification.conftest import tagged_sentences, write_conll
from tests.tasks.token_classification.test_row_store import datamodule
from tetraformer.data import train_tokenizer
from tetraformer.data.conll import TaggedSentence
from tetraformer.data.tag_schemes import entity_spans


def as_sentences(made: list[list[tuple[str, str]]]) -> list[TaggedSentence]:
    """The fixture's (word, tag) sentences as read."""
    return [TaggedSentence([w for w, _ in s], [t for _, t in s], "train.conll", 1 + 10 * i) for i, s in enumerate(made)]


def outside(sentence: TaggedSentence) -> list[str]:
    """The words tagged O, in order."""
    return [w for w, t in zip(sentence.tokens, sentence.tags or [], strict=True) if t == "O"]


def held_out_share_has_no_copies(files: dict[str, Path], cache: Path, n: int, **copies: Any) -> None:
    """Without a validation file, the held-out share is sentences as read (of the `n` in the training file), and
    training holds every other one of them and all of their copies, but no copy of a held-out one."""
    data = datamodule(files, cache, max_length=40, val_path=None, **copies)
    data.setup("fit")
    train, val = data.sentences["train"].indices, data.sentences["val"].indices
    assert len(val) == round(0.1 * n) and val.max() < n
    assert Counter((train % n).tolist()) == {i: 1 + sum(copies.values()) for i in range(n) if i not in val}


@pytest.mark.parametrize("scheme", ["IOB2", "BIOES"])
def test_copies_swap_entities_for_same_type_ones_and_keep_the_rest(scheme: str) -> None:
    originals = as_sentences(tagged_sentences(200, 3))
    if scheme == "BIOES":
        for s in originals:
            s.tags = [
                (
                    "S"
                    if t.startswith("B") and (i + 1 == len(s.tags) or not s.tags[i + 1].startswith("I"))
                    else "E"
                    if t.startswith("I") and (i + 1 == len(s.tags) or not s.tags[i + 1].startswith("I"))
                    else t[0]
                )
                + t[1:]
                for i, t in enumerate(s.tags)
            ]
    pool = mention_pool(originals, [entity_spans(s.tags, scheme) for s in originals])
    known = {kind: {tuple(words) for words, _ in found} for kind, found in pool.items()}
    copies = replaced_copies(originals, scheme, 2, 0.5, seed=7)
    assert len(copies) == 2 * len(originals) and {c.document for c in copies} == {-1, -2}
    changed = total = 0
    for copy, original in zip(copies, originals * 2, strict=True):
        assert outside(copy) == outside(original) and copy.where == original.where
        old, new = entity_spans(original.tags, scheme), entity_spans(copy.tags, scheme)
        assert [kind for kind, _, _ in new] == [kind for kind, _, _ in old]
        for (kind, start, end), (_, a, b) in zip(new, old, strict=True):
            assert tuple(copy.tokens[start:end]) in known[kind]
            total += 1
            changed += copy.tokens[start:end] != original.tokens[a:b]
    assert 0.2 < changed / total < 0.5  # half are drawn again; a draw can bring back the same words


def test_the_training_store_holds_the_copies_and_other_splits_are_untouched(tmp_path: Path) -> None:
    files = {"train": write_conll(tmp_path / "train.conll", tagged_sentences(30, 0))}
    files["test"] = files["predict"] = write_conll(tmp_path / "test.conll", tagged_sentences(8, 1))
    files["words"] = tmp_path / "words.txt"
    files["words"].write_text(" ".join(w for s in tagged_sentences(30, 0) for w, _ in s) + "\n", encoding="utf-8")
    train_tokenizer([files["words"]], "wordpiece", 100, tmp_path / "tok")
    files["tokenizer"] = tmp_path / "tok"
    files["val"] = write_conll(tmp_path / "val.conll", tagged_sentences(5, 2))
    held_out_share_has_no_copies(files, tmp_path / "cache", 30, mention_copies=3)
    val = str(files["val"])
    plain = datamodule(files, tmp_path / "cache", max_length=40, val_path=val)
    plain.setup("fit")
    plain.setup("test")
    copied = datamodule(files, tmp_path / "cache", max_length=40, val_path=val, mention_copies=3)
    copied.setup("fit")
    copied.setup("test")
    assert len(copied.sentences["train"].indices) == 4 * len(plain.sentences["train"].indices) == 120
    assert copied.vocabulary.names == plain.vocabulary.names
    for split in ("val", "test"):
        assert list(copied.datasets[split]) == list(plain.datasets[split])
        assert copied.row_options(split) == plain.row_options(split)
