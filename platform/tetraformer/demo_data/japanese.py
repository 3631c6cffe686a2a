"""Japanese demo data: gold NER (hironsancorpus), pretraining text from Debian's Japanese manuals and guides, and
chiVe word vectors (ja-ginza)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from tetraformer.demo_data.formats import read_iob_sentences, split_items, write_bert_splits, write_conll, write_text
from tetraformer.demo_data.japanese_prose import JAPANESE_DOC_PACKAGES, janome_segmenter, japanese_documents, morphemes
from tetraformer.demo_data.options import Counts, Options, cap
from tetraformer.demo_data.sources import SourceUnavailable, apt_packages_files, pick_file, pip_package_dir
from tetraformer.demo_data.spacy_vectors import spacy_vectors

log = logging.getLogger(__name__)


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
    from tetraformer.data.word_vectors import write_word_vectors  # here: `tetraformer.data` loads torch

    write_word_vectors(root / "ja_vectors", table, rows)
    return {"ja_vectors/words.tsv": len(rows), "ja_vectors/vectors.npy": len(table)}
