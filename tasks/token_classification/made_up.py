"""Made-up-word copies: training sentences whose proper nouns are swapped for words no training sentence has, so a
tagger learns to tag a name it has never seen from its context and spelling, not from having met it."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

from tetraformer.data.conll import TaggedSentence
from tetraformer.errors import ConfigError

START, END = "\x02", "\x03"  # marks around a word in the character model


class WordMaker:
    """Made-up words from a character trigram model of the training words (each distinct word counted once), none
    of them a training word in any case."""

    def __init__(self, words: Iterable[str], seed: int) -> None:
        self.known = {word.lower() for word in words}
        self.following: dict[str, list[str]] = defaultdict(list)  # two characters -> each character seen after them
        for word in sorted(w for w in self.known if w.isalpha()):
            chars = START * 2 + word + END
            for i in range(2, len(chars)):
                self.following[chars[i - 2 : i]].append(chars[i])
        self.rng = random.Random(seed)

    def make(self, like: str) -> str:
        """A made-up word cased as `like` (capitalised, or all capitals); `like` itself when none is found."""
        for _ in range(100):
            made = self.draw()
            if len(made) >= 2 and made not in self.known:
                return cased(made, like)
        return like

    def draw(self) -> str:
        """One word from the character model (at most 20 characters)."""
        word, context = "", START * 2
        while len(word) < 20:
            char = self.rng.choice(self.following[context])
            if char == END:
                break
            word, context = word + char, context[1] + char
        return word


def cased(word: str, like: str) -> str:
    """`word` in the case of `like`: all capitals for an all-capital word of two letters or more, else capitalised."""
    return word.upper() if len(like) > 1 and like.isupper() else word.capitalize()


def proper_nouns(sentences: Sequence[TaggedSentence]) -> set[str]:
    """Words of two letters or more that the sentences write capitalised after a word or comma more often than in
    lower case: proper nouns by the text alone, whatever their tags (so not `The`, capitalised where a sentence
    starts, nor `I`)."""
    capitalised, lower = Counter(), Counter()
    for sentence in sentences:
        for before, word in zip([".", *sentence.tokens[:-1]], sentence.tokens, strict=True):
            if word.islower():
                lower[word] += 1
            elif word[:1].isupper() and (before[-1:].isalnum() or before in {",", ";"}):
                capitalised[word] += 1
    return {w for w, n in capitalised.items() if len(w) > 1 and w.isalpha() and n > lower[w.lower()]}


def made_up_copies(
    sentences: Sequence[TaggedSentence], copies: int, probability: float, seed: int, skip: int = 0
) -> list[TaggedSentence]:
    """`copies` copies of the sentences in order, each occurrence of a proper noun (`proper_nouns`: entity or not, so
    a made-up word says nothing of the tag) swapped with `probability` for a made-up word; tags are kept, and each
    copy is a document of its own (-1 - skip, -2 - skip, ...: `skip` copies made otherwise come first)."""
    if not copies:
        return []
    names = proper_nouns(sentences)
    if not names:
        raise ConfigError(
            "--data.made_up_copies: the training text has no proper nouns to swap (no word written capitalised after "
            "a word more often than in lower case, as in a script without case); set it to 0"
        )
    maker = WordMaker((w for s in sentences for w in s.tokens), seed)
    out = []
    for copy in range(copies):
        for sentence in sentences:
            tokens = [maker.make(w) if w in names and maker.rng.random() < probability else w for w in sentence.tokens]
            out.append(replace(sentence, tokens=tokens, per_line=False, document=-1 - skip - copy))
    return out
