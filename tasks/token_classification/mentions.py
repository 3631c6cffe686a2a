"""Mention replacement (Dai and Adel, 2020): copies of the training sentences in which entities are swapped for other
training entities of the same type, so a tagger learns from the context around a name more than the name itself."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from tetraformer.data.conll import TaggedSentence
from tetraformer.data.tag_schemes import entity_spans

Mention = tuple[list[str], list[str]]  # an entity's words and their tags


def mention_pool(
    sentences: Sequence[TaggedSentence], spans: Sequence[list[tuple[str, int, int]]]
) -> dict[str, list[Mention]]:
    """Every entity of the sentences (as often as it occurs), by type, from each sentence's entity spans."""
    pool: dict[str, list[Mention]] = defaultdict(list)
    for sentence, found in zip(sentences, spans, strict=True):
        tags = sentence.tags or []
        for kind, start, end in found:
            pool[kind].append((sentence.tokens[start:end], tags[start:end]))
    return dict(pool)


def replaced_copies(
    sentences: Sequence[TaggedSentence], scheme: str, copies: int, probability: float, seed: int
) -> list[TaggedSentence]:
    """`copies` copies of the sentences in order, each entity swapped with `probability` for a random entity of its
    type; each copy is a document of its own (-1, -2, ...), so document context stays within it."""
    spans = [entity_spans(sentence.tags or [], scheme) for sentence in sentences]  # (type, start, end) each
    pool, rng = mention_pool(sentences, spans), random.Random(seed)
    out = []
    for copy in range(copies):
        for sentence, found in zip(sentences, spans, strict=True):
            tokens, tags = list(sentence.tokens), list(sentence.tags or [])
            for kind, start, end in reversed(found):  # from the end: earlier spans keep their place
                if rng.random() < probability:
                    words, their_tags = rng.choice(pool[kind])
                    tokens[start:end], tags[start:end] = words, their_tags
            out.append(replace(sentence, tokens=tokens, tags=tags, per_line=False, document=-1 - copy))
    return out
