"""Made-up-word copies: only proper nouns change (not a capitalised sentence start), each into a word no training
sentence has and in its case, about as often as asked, whatever its tag; tags, lengths and the other words stay; the
training store holds the copies after any mention-replaced ones, the other splits do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.token_classification.made_up import WordMaker, made_up_copies, proper_nouns
from tests.tasks.token_classification.conftest import tagged_sentences, write_conll
from tests.tasks.token_classification.test_mentions import as_sentences, held_out_share_has_no_copies
from tests.tasks.token_classification.test_row_store import datamodule
from tetraformer.data import train_tokenizer
from tetraformer.errors import ConfigError


def capitalised(made: list[list[tuple[str, str]]]) -> list[list[tuple[str, str]]]:
    """The fixture with its names and cities capitalised (a few shouted), "Sunday" (O) after every third sentence's
    first word, and each sentence's first word capitalised."""
    out = []
    for i, sentence in enumerate(made):
        tagged = [((w.upper() if i % 7 == 0 else w.capitalize()) if t != "O" else w, t) for w, t in sentence]
        tagged[1:1] = [("Sunday", "O")] if i % 3 == 0 else []
        tagged[0] = (tagged[0][0][0].upper() + tagged[0][0][1:], tagged[0][1])
        out.append(tagged)
    return out


def test_copies_swap_proper_nouns_for_new_words_whatever_their_tag() -> None:
    originals = as_sentences(capitalised(tagged_sentences(300, 3)))
    known, names = {w for s in originals for w in s.tokens}, proper_nouns(originals)
    assert "Sunday" in names and "Anna" in names and "ANNA" in names and not names & {"The", "We", "Went"}
    copies = made_up_copies(originals, 2, 0.5, seed=7, skip=1)
    assert len(copies) == 2 * len(originals) and {c.document for c in copies} == {-2, -3}
    changed = {"O": [0, 0], "name": [0, 0]}  # tag kind -> [changed, capitalised]
    for copy, original in zip(copies, originals * 2, strict=True):
        assert copy.tags == original.tags and copy.where == original.where
        for new, old, tag in zip(copy.tokens, original.tokens, original.tags, strict=True):
            kind = "O" if tag == "O" else "name"
            if old not in names:
                assert new == old
                continue
            changed[kind][1] += 1
            if new != old:
                changed[kind][0] += 1
                assert new not in known and new.isalpha() and len(new) >= 2
                assert new.isupper() == (len(old) > 1 and old.isupper()) and new[0].isupper()
    for kind, (swapped, total) in changed.items():
        assert total > 100 and 0.4 < swapped / total < 0.6, kind  # the same rate for names and other words
    assert made_up_copies(originals, 2, 0.5, seed=7, skip=1) == copies  # the seed fixes the copies
    assert made_up_copies(originals, 0, 0.5, seed=7) == []


def test_a_text_without_proper_nouns_is_an_error_naming_the_option() -> None:
    lower = as_sentences(tagged_sentences(20, 1))  # no capital anywhere, as in a script without case
    with pytest.raises(ConfigError, match=r"made_up_copies: the training text has no proper nouns"):
        made_up_copies(lower, 1, 0.5, seed=0)


def test_made_up_words_follow_the_training_words_spelling() -> None:
    words = ["anna", "hanna", "johanna", "savanna", "banana"] * 3
    maker = WordMaker(words, seed=0)
    made = {maker.make("Anna") for _ in range(50)}
    assert all(w[0].isupper() and w.lower().strip("anhjosvb") == "" for w in made)  # only letters those words have
    assert not made & {w.capitalize() for w in words}


def test_the_training_store_holds_the_made_up_copies_and_other_splits_are_untouched(tmp_path: Path) -> None:
    made = capitalised(tagged_sentences(30, 0))
    files = {"train": write_conll(tmp_path / "train.conll", made)}
    files["test"] = files["predict"] = write_conll(tmp_path / "test.conll", capitalised(tagged_sentences(8, 1)))
    files["words"] = tmp_path / "words.txt"
    files["words"].write_text(" ".join(w for s in made for w, _ in s) + "\n", encoding="utf-8")
    train_tokenizer([files["words"]], "wordpiece", 100, tmp_path / "tok")
    files["tokenizer"] = tmp_path / "tok"
    files["val"] = write_conll(tmp_path / "val.conll", capitalised(tagged_sentences(5, 2)))
    held_out_share_has_no_copies(files, tmp_path / "cache", 30, mention_copies=1, made_up_copies=2)
    val = str(files["val"])
    plain = datamodule(files, tmp_path / "cache", max_length=40, val_path=val)
    plain.setup("fit")
    copied = datamodule(files, tmp_path / "cache", max_length=40, val_path=val, mention_copies=1, made_up_copies=2)
    copied.setup("fit")
    train = copied.sentences["train"]
    assert len(train.indices) == 4 * len(plain.sentences["train"].indices) == 120
    assert copied.vocabulary.names == plain.vocabulary.names
    assert list(copied.datasets["val"]) == list(plain.datasets["val"])
