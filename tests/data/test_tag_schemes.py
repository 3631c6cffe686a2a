"""Tag schemes: which tags each allows, IOB1 -> IOB2, entity spans, and the transitions decoding may take."""

from __future__ import annotations

import itertools
import random

import pytest
from seqeval.metrics.sequence_labeling import get_entities

from tetraformer.data.tag_schemes import (
    SCHEMES,
    allowed_transitions,
    canonical_scheme,
    entity_spans,
    iob1_to_iob2,
    split_tag,
    tag_problem,
    to_canonical,
)

VALID = {
    "IOB1": ["O", "B-PER", "I-PER", "I-ORG-X"],
    "IOB2": ["O", "B-PER", "I-PER", "B-ORG-X"],
    "BIOES": ["O", "B-PER", "I-PER", "E-PER", "S-LOC"],
    "IO": ["O", "I-PER", "I-LOC"],
}
INVALID = {
    "IOB1": ["E-PER", "S-PER", "PER", "B-", "X-PER", "BB-PER", "o", ""],
    "IOB2": ["E-PER", "S-PER", "PER", "I-"],
    "BIOES": ["L-PER", "U-PER", "PER", "-PER"],
    "IO": ["B-PER", "E-PER", "S-PER", "PER"],
}
# CoNLL-2003 style IOB1: I- everywhere, B- only between two adjacent entities of one type
CONLL_IOB1 = [
    ("U.N.", "I-ORG"),
    ("official", "O"),
    ("Ekeus", "I-PER"),
    ("heads", "O"),
    ("for", "O"),
    ("Baghdad", "I-LOC"),
    (".", "O"),
    ("Germany", "I-LOC"),
    ("France", "B-LOC"),
    ("New", "I-LOC"),
    ("York", "I-LOC"),
    ("Peter", "I-PER"),
    ("Blackburn", "I-PER"),
    ("EU", "I-ORG"),
    ("German", "I-MISC"),
]
CONLL_IOB2 = [
    "B-ORG",
    "O",
    "B-PER",
    "O",
    "O",
    "B-LOC",
    "O",
    "B-LOC",
    "B-LOC",
    "I-LOC",
    "I-LOC",
    "B-PER",
    "I-PER",
    "B-ORG",
    "B-MISC",
]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_tag_problem_accepts_the_scheme_tags_and_names_them_otherwise(scheme: str) -> None:
    """Valid tags give None; others a reason that quotes the tag and lists the scheme's tag forms."""
    for tag in VALID[scheme]:
        assert tag_problem(tag, scheme) is None, tag
    for tag in INVALID[scheme]:
        problem = tag_problem(tag, scheme)
        assert problem is not None and repr(tag) in problem and f"{scheme} tags are O, " in problem


def test_tag_problem_message_and_unknown_scheme() -> None:
    """The message says which forms the scheme has; an unknown scheme lists every scheme."""
    assert tag_problem("E-PER", "IOB2") == "'E-PER' is not an IOB2 tag: IOB2 tags are O, B-TYPE, I-TYPE"
    assert tag_problem("B-PER", "IO") == "'B-PER' is not an IO tag: IO tags are O, I-TYPE"
    assert (
        tag_problem("L-PER", "BIOES") == "'L-PER' is not a BIOES tag: BIOES tags are O, B-TYPE, I-TYPE, E-TYPE, S-TYPE"
    )
    with pytest.raises(ValueError, match="IOB1, IOB2, BIOES, IO"):
        tag_problem("O", "BILOU")


def test_split_tag_keeps_hyphens_of_the_type() -> None:
    """The prefix is one letter before the first hyphen; the rest is the type."""
    assert split_tag("B-ORG-X") == ("B", "ORG-X") and split_tag("O") == ("O", "")
    assert split_tag("PER") == split_tag("B-") == split_tag("BB-PER") == ("", "")


def test_iob1_to_iob2_on_a_conll_fixture() -> None:
    """Every entity of the CoNLL-2003-style fixture starts with B- after conversion; B- between entities stays."""
    tags = [tag for _, tag in CONLL_IOB1]
    assert iob1_to_iob2(tags) == CONLL_IOB2
    assert entity_spans(tags, "IOB1") == entity_spans(CONLL_IOB2, "IOB2")
    assert iob1_to_iob2(CONLL_IOB2) == CONLL_IOB2  # IOB2 is valid IOB1 and is left alone


def test_canonical_forms() -> None:
    """IOB1 becomes IOB2; other schemes are their own canonical form and their tags stay as they are."""
    assert [canonical_scheme(s) for s in SCHEMES] == ["IOB2", "IOB2", "BIOES", "IO"]
    assert to_canonical(["I-PER", "I-PER"], "IOB1") == ["B-PER", "I-PER"]
    for scheme in ("IOB2", "BIOES", "IO"):
        assert to_canonical(["I-PER", "O"], scheme) == ["I-PER", "O"]
    with pytest.raises(ValueError, match="unknown tag scheme"):
        canonical_scheme("BIO")


@pytest.mark.parametrize(
    ("scheme", "tags", "spans"),
    [
        ("IOB2", ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"], [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 6)]),
        ("IOB2", ["O", "I-PER", "I-PER", "I-LOC"], [("PER", 1, 3), ("LOC", 3, 4)]),  # lenient: I- starts
        ("IOB2", ["B-PER", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 2)]),
        ("IOB1", ["I-PER", "I-PER", "B-PER", "O", "I-LOC"], [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5)]),
        ("BIOES", ["B-PER", "I-PER", "E-PER", "S-LOC", "S-LOC", "O"], [("PER", 0, 3), ("LOC", 3, 4), ("LOC", 4, 5)]),
        ("BIOES", ["B-PER", "I-PER"], [("PER", 0, 2)]),  # lenient: an unfinished entity ends with the sentence
        ("BIOES", ["E-PER", "E-PER", "I-ORG"], [("PER", 0, 1), ("PER", 1, 2), ("ORG", 2, 3)]),
        ("IO", ["I-PER", "I-PER", "I-LOC", "O", "I-LOC"], [("PER", 0, 2), ("LOC", 2, 3), ("LOC", 4, 5)]),
        ("IO", ["O", "O"], []),
    ],
)
def test_entity_spans_by_hand(scheme: str, tags: list[str], spans: list[tuple[str, int, int]]) -> None:
    """Spans are (type, start, end-exclusive) word indices, read as the scheme means them."""
    assert entity_spans(tags, scheme) == spans


def test_entity_spans_read_like_seqeval_default_mode() -> None:
    """On random tag sequences (valid or not) the spans are seqeval's conlleval-style entities."""
    rng = random.Random(0)
    tags = ["O", *(f"{p}-{t}" for p in "BIES" for t in ("PER", "LOC"))]
    for _ in range(500):
        sequence = [rng.choice(tags) for _ in range(rng.randint(0, 10))]
        expected = [(kind, start, end + 1) for kind, start, end in get_entities(sequence)]
        assert entity_spans(sequence, "BIOES") == expected, sequence


def _valid(sequence: tuple[str, ...], scheme: str) -> bool:
    """Whether a sequence is well formed in a canonical scheme, from the scheme's definition."""
    kinds = [split_tag(tag) for tag in sequence]
    for (prev, prev_kind), (cur, kind) in zip([("O", ""), *kinds], [*kinds, ("O", "")], strict=True):
        opened = prev in ("B", "I")
        if cur in ("I", "E") and not (opened and prev_kind == kind) and scheme != "IO":
            return False
        if scheme == "BIOES" and opened and not (cur in ("I", "E") and prev_kind == kind):
            return False
    return True


@pytest.mark.parametrize("scheme", ["IOB2", "BIOES", "IO"])
def test_allowed_transitions_agree_with_the_scheme_on_every_pair(scheme: str) -> None:
    """start[j], trans[i, j] and end[i] hold exactly when a 1- or 2-tag sentence can begin, go on, end so."""
    labels = {
        "IOB2": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
        "BIOES": ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "E-LOC", "S-LOC", "I-LOC"],
        "IO": ["O", "I-PER", "I-LOC"],
    }[scheme]
    start, trans, end = allowed_transitions(labels, scheme)
    n = len(labels)
    assert start.shape == end.shape == (n,) and trans.shape == (n, n) and trans.dtype == start.dtype
    # a 2-tag pair inside a valid sentence: pad it with an entity that closes (E-/I- then O) where needed
    for i, j in itertools.product(range(n), repeat=2):
        a, b = labels[i], labels[j]
        assert bool(trans[i, j]) == _pair_possible(a, b, scheme), (a, b)
    for j, tag in enumerate(labels):
        assert bool(start[j]) == _valid((tag, *_closing(tag, scheme)), scheme), tag
        assert bool(end[j]) == _valid((*_opening(tag, scheme), tag), scheme), tag
    if scheme == "IO":
        assert start.all() and trans.all() and end.all()


def _opening(tag: str, scheme: str) -> tuple[str, ...]:
    """A tag that validly leads into `tag` (so only `tag`'s ending is in question)."""
    prefix, kind = split_tag(tag)
    return (f"B-{kind}",) if prefix in ("I", "E") and scheme != "IO" else ()


def _closing(tag: str, scheme: str) -> tuple[str, ...]:
    """A tag that validly closes after `tag` (so only `tag`'s start is in question)."""
    prefix, kind = split_tag(tag)
    return (f"E-{kind}",) if prefix in ("B", "I") and scheme == "BIOES" else ()


def _pair_possible(a: str, b: str, scheme: str) -> bool:
    """Whether `a` then `b` can occur in some valid sentence of the scheme."""
    return _valid((*_opening(a, scheme), a, b, *_closing(b, scheme)), scheme)


def test_allowed_transitions_read_iob1_as_iob2_and_reject_foreign_labels() -> None:
    """IOB1 decodes in IOB2; a label outside the scheme is a ValueError with the reason."""
    labels = ["O", "B-PER", "I-PER"]
    iob1, iob2 = allowed_transitions(labels, "IOB1"), allowed_transitions(labels, "IOB2")
    assert all(bool((x == y).all()) for x, y in zip(iob1, iob2, strict=True))
    assert not iob2[0][2] and not iob2[1][0, 2] and iob2[1][1, 2]
    with pytest.raises(ValueError, match="'E-PER' is not an IOB2 tag"):
        allowed_transitions(["O", "E-PER"], "IOB2")
