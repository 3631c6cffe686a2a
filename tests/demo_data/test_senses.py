"""Tests for the WordNet word-sense pair builder (tetraformer.demo_data.senses) on handmade data files."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest

from tetraformer.demo_data import senses

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by Princeton University\n"


def synset(offset: int, pos: str, words: list[str], gloss: str) -> str:
    """One data.<pos> line in WordNet's format (no pointers)."""
    listed = " ".join(f"{w} 0" for w in words)
    return f"{offset:08d} 04 {pos} {len(words):02x} {listed} 000 | {gloss}  \n"


def test_parse_synset_line_reads_words_definition_and_examples() -> None:
    """Words lose markers and underscores, the definition stops before the examples, short examples drop."""
    line = synset(1, "s", ["Ice_Cold(p)", "frosty"], 'very cold; "an ice cold drink on a hot day"; "brr"')
    sense = senses.parse_synset_line(line, "a")
    assert sense == senses.Sense("a", ("ice cold", "frosty"), "very cold", ("an ice cold drink on a hot day",))
    assert senses.parse_synset_line(HEADER, "n") is None


def test_target_word_matches_inflections() -> None:
    """An inflected form ('runs') finds its word ('run'); a sentence without the word gives None."""
    run = senses.Sense("v", ("run",), "move fast", ())
    assert senses.target_word(run, "she runs every morning") == "run"
    assert senses.target_word(run, "she walks every morning") is None


def test_sense_pairs_pair_each_example_with_its_own_and_another_sense() -> None:
    """Each usable example yields a match (its own definition) and an other (a sibling sense of the word)."""
    bank_river = senses.Sense("n", ("bank",), "sloping land beside water", ("they sat on the bank of the river",))
    bank_money = senses.Sense("n", ("bank",), "a financial institution", ("he cashed a check at the bank",))
    lonely = senses.Sense("n", ("zebra",), "striped horse", ("a zebra in the zoo",))  # one sense: no pair
    pairs = senses.sense_pairs([bank_river, bank_money, lonely], {"bank", "zebra"}, random.Random(0))
    assert len(pairs) == 4
    for match, other in zip(pairs[::2], pairs[1::2], strict=True):
        assert (match["label"], other["label"]) == ("match", "other")
        assert match["sentence"] == other["sentence"] and match["definition"] != other["definition"]
    river = next(p for p in pairs if "river" in p["sentence"] and p["label"] == "match")
    assert river["definition"] == "bank: sloping land beside water"


def test_builder_keeps_each_word_in_one_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No target word appears in two splits; labels balance; the training cap holds."""
    folder = tmp_path / "pkg" / "data/nltk-data/corpora/wordnet"
    folder.mkdir(parents=True)
    lines = [HEADER]
    for w in range(60):
        for k in range(2):
            lines.append(synset(2 * w + k, "n", [f"word{w}"], f'sense {k} of word{w}; "we saw the word{w} there {k}"'))
    (folder / "data.noun").write_text("".join(lines), encoding="utf-8")
    for name in ("verb", "adj", "adv"):
        (folder / f"data.{name}").write_text(HEADER, encoding="utf-8")
    monkeypatch.setattr(senses, "pip_package_dir", lambda dist, module: tmp_path / "pkg")
    counts = senses.build_word_senses(tmp_path / "out", seed=5, train_cap=40)
    assert counts["word_senses/train.csv"] == 40
    words = {}
    for split in ("train", "val", "test"):
        with (tmp_path / "out" / "word_senses" / f"{split}.csv").open(encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        labels = [r["label"] for r in rows]
        assert labels.count("match") == labels.count("other") > 0
        words[split] = {r["definition"].split(":")[0] for r in rows}
    assert not words["train"] & words["val"] and not words["train"] & words["test"] and not words["val"] & words["test"]
