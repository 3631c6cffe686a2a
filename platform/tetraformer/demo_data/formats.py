"""Splitting, writing and parsing helpers of the demo-data builders; pure functions over small inputs."""

from __future__ import annotations

import csv
import gzip
import json
import random
import re
import struct
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, TypeVar

from tetraformer.demo_data.sources import SourceUnavailable

T = TypeVar("T")


# --------------------------------------------------------------------------- splitting


def split_items(items: Sequence[T], fractions: Sequence[float], seed: int) -> list[list[T]]:
    """Shuffle a copy with a seeded RNG and cut it into consecutive parts sized by `fractions`."""
    order = list(items)
    random.Random(seed).shuffle(order)
    total, acc, cuts = sum(fractions), 0.0, [0]
    for fraction in fractions[:-1]:
        acc += fraction
        cuts.append(round(len(order) * acc / total))
    cuts.append(len(order))
    return [order[start:stop] for start, stop in pairwise(cuts)]


def stratified_split(
    items: Sequence[T], key: Callable[[T], Hashable], fractions: Sequence[float], seed: int
) -> list[list[T]]:
    """split_items within each group of `key`, so every part keeps the group mix; parts are shuffled."""
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    parts: list[list[T]] = [[] for _ in fractions]
    for group in sorted(groups, key=str):
        for part, chunk in zip(parts, split_items(groups[group], fractions, seed), strict=True):
            part.extend(chunk)
    for offset, part in enumerate(parts):
        random.Random(seed + offset).shuffle(part)
    return parts


PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def split_text(text: str, fraction: float = 0.9) -> tuple[str, str]:
    """Cut text at the first paragraph break at or after `fraction` of its characters."""
    point = int(len(text) * fraction)
    found = PARAGRAPH_BREAK.search(text, point)
    cut = found.end() if found else point
    return text[:cut].rstrip() + "\n", text[cut:].strip("\n") + "\n"


# --------------------------------------------------------------------------- writers


def write_text(path: Path, text: str) -> int:
    """Write UTF-8 text; return its line count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text.count("\n")


def write_csv(path: Path, rows: Sequence[dict[str, str]], fields: Sequence[str]) -> int:
    """Write rows as CSV with a header (the csv module quotes as needed); return the row count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> int:
    """Write one JSON object per line (UTF-8, not escaped); return the row count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return len(rows)


def bert_text(documents: Iterable[Iterable[str]]) -> str:
    """BERT's pretraining format: one sentence per line, a blank line between documents."""
    return "\n\n".join("\n".join(document) for document in documents) + "\n"


def write_bert_splits(root: Path, folder: str, train: list[list[str]], val: list[list[str]]) -> dict[str, int]:
    """Masked-LM documents (lists of sentences) -> FOLDER/{train,val}.txt in BERT's pretraining format."""
    return {
        f"{folder}/{split}.txt": write_text(root / folder / f"{split}.txt", bert_text(documents))
        for split, documents in (("train", train), ("val", val))
    }


def conll_lines(path: Path, sentences: Iterable[Sequence[tuple[str, str]]]) -> list[str]:
    """token<TAB>tag lines with a blank line after each sentence; a bad token or tag names `path`."""
    lines = []
    for sentence in sentences:
        for token, tag in sentence:
            if not token or any(ch.isspace() for ch in token) or not tag:
                raise ValueError(f"bad CoNLL token {token!r} with tag {tag!r} in {path}")
            lines.append(f"{token}\t{tag}\n")
        lines.append("\n")
    return lines


def write_conll(path: Path, sentences: Sequence[Sequence[tuple[str, str]]]) -> int:
    """Write token<TAB>tag lines with a blank line after each sentence; return the sentence count."""
    write_text(path, "".join(conll_lines(path, sentences)))
    return len(sentences)


def write_conll_documents(path: Path, documents: Sequence[Sequence[Sequence[tuple[str, str]]]]) -> int:
    """Write documents of sentences as CoNLL, a `-DOCSTART-` line before each; return the sentence count."""
    lines = []
    for document in documents:
        lines += ["-DOCSTART-\tO\n", "\n", *conll_lines(path, document)]
    write_text(path, "".join(lines))
    return sum(len(document) for document in documents)


def write_images(folder: Path, images: Iterable[tuple[str, str, Any]]) -> int:
    """Save (class_name, stem, uint8 array) as folder/<class_name>/<stem>.png; return the count."""
    from PIL import Image

    count = 0
    for label, stem, pixels in images:
        (folder / label).mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(folder / label / f"{stem}.png")
        count += 1
    return count


# --------------------------------------------------------------------------- parsers


def read_orange_tab(text: str) -> list[dict[str, str]]:
    """Rows of an Orange .tab table (header lines: names, types, flags) as dicts by column name."""
    lines = text.splitlines()
    names = lines[0].split("\t")
    rows = []
    for line in lines[3:]:
        if line.strip():
            values = line.split("\t")
            rows.append(dict(zip(names, values + [""] * (len(names) - len(values)), strict=False)))
    return rows


ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|\([^()]*\)|(?<!\S)/[^/\s]+/(?!\S)")  # {f} [Br.] (...) /AEC/
SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,.;:!?])")
MAX_TERM_CHARS = 80


def clean_term(term: str) -> str:
    """Drop {gender}, [domain], (comment) and /ABBR/ annotations, innermost first; tidy whitespace."""
    previous = None
    while previous != term:
        previous, term = term, ANNOTATION.sub(" ", term)
    return SPACE_BEFORE_PUNCTUATION.sub(r"\1", " ".join(term.split()))


def first_alternative(part: str) -> str | None:
    """The first clean synonym of a ';'-separated Ding field (no leftover brackets or a/b slashes), or None."""
    for alternative in part.split(";"):
        term = alternative.strip()
        if term and len(term) <= MAX_TERM_CHARS and not re.search(r"[{}\[\]()/]", term):
            return term
    return None


def parse_ding_line(line: str) -> list[tuple[str, str]]:
    """(german, english) pairs from one Ding line `de | de :: en | en`, one per aligned '|' field."""
    line = line.strip()
    if not line or line.startswith("#") or line.count(" :: ") != 1:
        return []
    german, english = (clean_term(side).split("|") for side in line.split(" :: "))
    if len(german) != len(english):
        return []
    pairs = []
    for de_part, en_part in zip(german, english, strict=True):
        source, target = first_alternative(de_part), first_alternative(en_part)
        if source and target:
            pairs.append((source, target))
    return pairs


SENTENCE_END = (".", "!", "?")
WORD_CHARS = re.compile(r"[^\w\s]")


def is_sentence(text: str, min_words: int = 3) -> bool:
    """A Ding example sentence: at least `min_words` words and ending in . ! or ?."""
    return text.endswith(SENTENCE_END) and len(text.split()) >= min_words


def normalise_source(text: str) -> str:
    """The key two sources share when they differ only in case, punctuation or spacing."""
    return " ".join(WORD_CHARS.sub(" ", text.casefold()).split())


def pick_held_out(
    pairs: Sequence[tuple[str, str]], held_out: int, eligible: Callable[[str], bool], seed: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """Seeded val and test sets of `held_out` eligible pairs each (one per normalised source), and the pairs
    left for training: none of them shares a normalised source with a held-out pair."""
    by_key: dict[str, tuple[str, str]] = {}
    for source, target in pairs:
        if eligible(source):
            by_key.setdefault(normalise_source(source), (source, target))  # first pair per key
    picked = random.Random(seed).sample(sorted(by_key), min(2 * held_out, len(by_key)))
    held = set(picked)
    rest = [(s, t) for s, t in pairs if normalise_source(s) not in held]
    return [by_key[k] for k in picked[:held_out]], [by_key[k] for k in picked[held_out:]], rest


def as_rows(group: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """(source, target) pairs as JSONL rows."""
    return [{"source": s, "target": t} for s, t in group]


def split_sentence_pairs(
    pairs: Sequence[tuple[str, str]], held_out: int, max_words: int, seed: int
) -> dict[str, list[dict[str, str]]]:
    """Seeded val/test sets of short sentences; train keeps the other sentences, phrases and words the rest.

    Val and test each take `held_out` sentence pairs of at most `max_words` German words, one per normalised
    source; no pair whose normalised source is held out reaches train, phrases or words.
    """
    short = lambda source: is_sentence(source) and len(source.split()) <= max_words  # noqa: E731
    val, test, rest = pick_held_out(pairs, held_out, short, seed)
    groups = {
        "val": val,
        "test": test,
        "train": [(s, t) for s, t in rest if is_sentence(s)],
        "phrases": [(s, t) for s, t in rest if not is_sentence(s) and len(s.split()) > 1],
        "words": [(s, t) for s, t in rest if not is_sentence(s) and len(s.split()) == 1],
    }
    return {name: as_rows(group) for name, group in groups.items()}


MESSAGE_MAX_WORDS = 30  # longer program messages are help texts, not sentences


def read_mo(path: Path) -> dict[Any, str]:
    """A compiled gettext catalog (.mo): msgid (or (msgid, n) for plural forms) -> translation."""
    import gettext

    with path.open("rb") as f:
        return gettext.GNUTranslations(f)._catalog  # noqa: SLF001 - the parsed catalog, as gettext keeps it


def message_pairs(catalog: dict[Any, str]) -> list[tuple[str, str]]:
    """(translation, English msgid) pairs of one catalog: singular forms, context dropped, one line each, at most
    MESSAGE_MAX_WORDS words, only messages the catalog actually translates."""
    pairs = []
    for key, translated in catalog.items():
        if isinstance(key, tuple):
            key, form = key
            if form != 0:
                continue
        original = str(key).split("\x04")[-1]  # "context\x04message" -> message
        english, foreign = " ".join(original.split()), " ".join(translated.split())
        multiline = "\n" in original.strip() or "\n" in translated.strip()
        if not english or not foreign or english == foreign or multiline:
            continue
        if max(len(english.split()), len(foreign.split())) <= MESSAGE_MAX_WORDS:
            pairs.append((foreign, english))
    return pairs


def split_message_pairs(
    pairs: Sequence[tuple[str, str]], held_out: int, min_words: int, seed: int
) -> dict[str, list[dict[str, str]]]:
    """Seeded val/test sets of messages of at least `min_words` source words; train keeps every other pair,
    none sharing a held-out normalised source."""
    val, test, rest = pick_held_out(pairs, held_out, lambda source: len(source.split()) >= min_words, seed)
    return {"train": as_rows(rest), "val": as_rows(val), "test": as_rows(test)}


def repair_bio(tags: Sequence[str]) -> list[str]:
    """Turn an I-X that does not continue an X entity into B-X (valid BIO)."""
    fixed, previous = [], "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        fixed.append(tag)
        previous = tag
    return fixed


def read_iob_sentences(text: str) -> list[list[tuple[str, str]]]:
    """Sentences of (token, tag) from blank-line separated rows whose first column is the token and last the tag."""
    sentences = []
    for block in re.split(r"\n\s*\n", text):
        rows = [line.split("\t") for line in block.splitlines() if line.strip()]
        rows = [row for row in rows if row[0].strip()]  # drop U+3000 space tokens: CoNLL readers split on whitespace
        if rows:
            tags = repair_bio([row[-1].strip() for row in rows])
            sentences.append([(row[0], tag) for row, tag in zip(rows, tags, strict=True)])
    return sentences


def read_idx(path: Path) -> Any:
    """A gzipped IDX (MNIST) array as numpy uint8."""
    import numpy as np

    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[:3] != b"\x00\x00\x08":
        raise SourceUnavailable(f"{path} is not a uint8 IDX file")
    shape = struct.unpack(f">{data[3]}I", data[4 : 4 + 4 * data[3]])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * data[3]).reshape(shape)


def sample_indices(total: int, limit: int | None, seed: int) -> list[int]:
    """A seeded, sorted subset of range(total) of size `limit` (all when None)."""
    if limit is None or limit >= total:
        return list(range(total))
    return sorted(random.Random(seed).sample(range(total), limit))
