"""Tag schemes of token labelling (IOB1, IOB2, BIOES, IO): checks, IOB1 -> IOB2, entity spans, transitions.

A tag is `O` or `PREFIX-TYPE` (the type may itself hold hyphens: `B-ORG-X` is type `ORG-X`).
- IOB2 (BIO): every entity starts with B-TYPE, continues with I-TYPE.
- IOB1: I-TYPE everywhere; B-TYPE only where an entity directly follows one of the same type.
- BIOES: B-TYPE, I-TYPE..., E-TYPE for an entity of several words; S-TYPE for a one-word entity.
- IO: O and I-TYPE only; a run of one type is one entity (adjacent entities of one type cannot be told
  apart). B-TYPE is not an IO tag: data with B- tags is IOB1 or IOB2, and saying so catches a wrong choice.
IOB1 is converted to IOB2 on reading (`to_canonical`); models and decoding work in the canonical scheme.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

SCHEMES = ("IOB1", "IOB2", "BIOES", "IO")
OUTSIDE = "O"
PREFIXES = {"IOB1": "BI", "IOB2": "BI", "BIOES": "BIES", "IO": "I"}  # the prefixes each scheme allows


def check_scheme(scheme: str) -> None:
    """Raise a ValueError listing SCHEMES when `scheme` is not one of them."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")


def split_tag(tag: str) -> tuple[str, str]:
    """(prefix, type) of a tag: ("O", "") for O, ("B", "PER") for B-PER; ("", "") when it has no prefix."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, sep, kind = tag.partition("-")
    if not sep or len(prefix) != 1 or not kind:
        return "", ""
    return prefix, kind


def looks_like_tag(tag: str) -> bool:
    """Whether a string is a tag of some scheme: O, or B-, I-, E- or S- and a type."""
    prefix, _ = split_tag(tag)
    return prefix == OUTSIDE or (bool(prefix) and prefix in PREFIXES["BIOES"])


def tag_problem(tag: str, scheme: str) -> str | None:
    """None when `tag` is a valid tag of `scheme`, else a one-line reason naming the scheme's tags."""
    check_scheme(scheme)
    prefix, _ = split_tag(tag)
    if prefix == OUTSIDE or (prefix and prefix in PREFIXES[scheme]):
        return None
    allowed = ", ".join([OUTSIDE, *(f"{p}-TYPE" for p in PREFIXES[scheme])])
    article = "a" if scheme == "BIOES" else "an"
    return f"{tag!r} is not {article} {scheme} tag: {scheme} tags are {allowed}"


def canonical_scheme(scheme: str) -> str:
    """The scheme models are trained in: IOB2 for IOB1 data, the scheme itself otherwise."""
    check_scheme(scheme)
    return "IOB2" if scheme == "IOB1" else scheme


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 tags as IOB2: an I-TYPE that starts an entity (after O, another type, or first) becomes B-TYPE."""
    out: list[str] = []
    previous = OUTSIDE
    for tag in tags:
        prefix, kind = split_tag(tag)
        if prefix == "I" and split_tag(previous)[1] != kind:
            tag = f"B-{kind}"
        out.append(tag)
        previous = tag
    return out


def to_canonical(tags: Sequence[str], scheme: str) -> list[str]:
    """Tags in the canonical scheme: IOB1 converted to IOB2, other schemes unchanged."""
    check_scheme(scheme)
    return iob1_to_iob2(tags) if scheme == "IOB1" else list(tags)


def entity_spans(tags: Sequence[str], scheme: str) -> list[tuple[str, int, int]]:
    """(type, start, end) of every entity, word indices with `end` exclusive, read leniently as conlleval does.

    Tags that break the scheme still give entities rather than errors: an I-/E- tag after O or after another
    type starts an entity; an entity ends before O, B-, S-, a change of type, and after E- or S-; a tag without
    a prefix counts as O. Each scheme's own sequences read as the scheme means them (in IOB1, a B- after an
    entity of its type starts a new one).
    """
    check_scheme(scheme)
    spans: list[tuple[str, int, int]] = []
    start, kind, previous = None, "", OUTSIDE
    for i, tag in enumerate([*tags, OUTSIDE]):  # a final O closes an open entity
        prefix, tag_kind = split_tag(tag)
        if start is not None and _ends_before(previous, prefix, kind, tag_kind):
            spans.append((kind, start, i))
            start = None
        if start is None and prefix not in (OUTSIDE, ""):
            start, kind = i, tag_kind
        previous = prefix
    return spans


def _ends_before(previous: str, prefix: str, kind: str, tag_kind: str) -> bool:
    """Whether an open entity of `kind`, last tagged with prefix `previous`, ends before this tag."""
    return previous in ("E", "S") or prefix in (OUTSIDE, "", "B", "S") or tag_kind != kind


def allowed_transitions(labels: Sequence[str], scheme: str) -> tuple[Tensor, Tensor, Tensor]:
    """Which labels may start a sentence, follow one another and end it, in `scheme`'s canonical form.

    Returns `start` (L,) bool, `trans` (L, L) bool indexed [from, to], `end` (L,) bool. IOB2: I-X only after
    B-X or I-X. BIOES: I-X and E-X only after B-X or I-X, and B-X / I-X only before I-X or E-X, so B/I never
    end a sentence. IO: every sequence is valid. A label outside the scheme is a ValueError.
    """
    scheme = canonical_scheme(scheme)
    parts = []
    for label in labels:
        problem = tag_problem(label, scheme)
        if problem is not None:
            raise ValueError(problem)
        parts.append(split_tag(label))
    n = len(parts)
    start, end = torch.ones(n, dtype=torch.bool), torch.ones(n, dtype=torch.bool)
    trans = torch.ones(n, n, dtype=torch.bool)  # (L, L) [from, to]
    if scheme == "IO":
        return start, trans, end
    for j, (to_prefix, to_kind) in enumerate(parts):
        continues = to_prefix in ("I", "E")  # goes on with an entity opened before
        start[j] = not continues
        end[j] = scheme == "IOB2" or to_prefix not in ("B", "I")
        for i, (from_prefix, from_kind) in enumerate(parts):
            open_entity = from_prefix in ("B", "I")  # may be followed by I- or E- of its type
            if continues:
                trans[i, j] = open_entity and from_kind == to_kind
            elif scheme == "BIOES":
                trans[i, j] = not open_entity
    return start, trans, end
