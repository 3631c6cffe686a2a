"""The vocabulary a training text supports: a requested size past it is capped, with one warning line.

Why cap: a sub-word trainer given more slots than the text's frequent words need spends the rest on rare words
(most words of a small text are seen once): each gets pieces of its own, learnt from one or two examples, and
related words share nothing ("Edelsteinlupen" may become one piece, not "Edelstein" + "lupen"). Sennrich & Zhang (2019,
"Revisiting Low-Resource Neural Machine Translation") found small vocabularies best on small corpora for this.

The rule: a word earns a whole piece once the text shows it MIN_COUNT times (enough to learn an embedding), and
with it the pieces a merging trainer builds on the way (one per character after the first, at most); so

    supported = specials + alphabet + sum over words seen MIN_COUNT+ times of max(len(word) - 1, 1)

where the alphabet is what the trainer starts from (256 bytes for byte-level BPE, each character and its ##
continuation for WordPiece, the characters for Unigram) and the words are the trainer's own (its normaliser and
pre-tokenizer). Past that size every new piece serves only words seen under MIN_COUNT times. It never goes below
the alphabet plus the special tokens, and a text whose every word repeats (a toy corpus) keeps room to spell them
all whole. The count is of the text alone, so the same text gives the same cap. Large text is not capped: Reuters
R8's 4,936 training texts support 36,728 WordPiece pieces, the 45,000 de_en dictionary pairs (both sides) 32,317
Unigram ones; the first 8,000 of those pairs support 3,809 (739 words seen 5+ times), so 8,000 is capped there.
Counting stops as soon as the text supports the requested size, so a large corpus is read only until then.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tetraformer.data.tokenizer import TokenizerKind, word_splitter

log = logging.getLogger(__name__)

MIN_COUNT = 5  # times the text must show a word before it deserves its own piece
BYTE_ALPHABET = 256  # byte-level BPE starts from every byte


@dataclass(frozen=True)
class TextInventory:
    """What a training text offers a tokenizer: its distinct words, those seen MIN_COUNT times and the pieces that
    spell them, its characters."""

    words: int
    frequent: int
    spelling: int  # sum of max(len - 1, 1) over the frequent words: the merges that make each one whole
    chars: int
    complete: bool = True  # False: counting stopped once the text supported the requested size


def alphabet_size(kind: TokenizerKind, chars: int) -> int:
    """The pieces a trainer of this kind starts from, before any merge."""
    return {"bpe": BYTE_ALPHABET, "wordpiece": 2 * chars}.get(kind, chars)


def supported_vocab_size(inventory: TextInventory, kind: TokenizerKind, specials: int) -> int:
    """The largest vocabulary whose pieces the text shows often enough (see the module docstring)."""
    return specials + alphabet_size(kind, inventory.chars) + inventory.spelling


def text_inventory(
    texts: Iterable[str], split: Callable[[str], list[str]], enough: Callable[[TextInventory], bool] | None = None
) -> TextInventory:
    """Count the texts' distinct words (as `split` gives them), the frequent ones and their characters; stop early
    (complete=False) once `enough` says the counts so far suffice."""
    counts: Counter[str] = Counter()
    chars: set[str] = set()
    frequent = spelling = 0
    for text in texts:
        words = split(text)
        for word in words:
            counts[word] += 1
            if counts[word] == MIN_COUNT:
                frequent, spelling = frequent + 1, spelling + max(len(word) - 1, 1)
        chars.update("".join(words))
        if enough is not None and enough(TextInventory(len(counts), frequent, spelling, len(chars), complete=False)):
            return TextInventory(len(counts), frequent, spelling, len(chars), complete=False)
    return TextInventory(len(counts), frequent, spelling, len(chars))


def cap_vocab_size(
    texts: Iterable[str],
    kind: TokenizerKind,
    vocab_size: int,
    specials: int,
    lowercase: bool = False,
    option: str = "data.vocab_size",
    opt_out: str = "--data.vocab_cap false",
    chinese_chars: bool = True,
    zero_digits: bool = False,
) -> int:
    """`vocab_size`, or the smaller size the texts support (one warning line naming `option`, the sizes and why).

    A char tokenizer is never capped: its vocabulary is the characters seen, and a larger request is a ceiling.
    """
    if kind == "char":
        return vocab_size
    inventory = text_inventory(
        texts,
        word_splitter(kind, lowercase, chinese_chars, zero_digits),
        lambda inv: supported_vocab_size(inv, kind, specials) >= vocab_size,
    )
    cap = supported_vocab_size(inventory, kind, specials)
    if cap >= vocab_size:
        return vocab_size
    alphabet = alphabet_size(kind, inventory.chars)
    log.warning(
        "%s=%d but the training text has %d distinct words, %d of them seen %d+ times: capping the vocabulary to "
        "%d (%d special + %d alphabet + %d pieces, enough to spell each of those words whole) so the rarer words "
        "are spelt from shared pieces instead of getting their own from one or two examples; %s keeps %d",
        option,
        vocab_size,
        inventory.words,
        inventory.frequent,
        MIN_COUNT,
        cap,
        specials,
        alphabet,
        inventory.spelling,
        opt_out,
        vocab_size,
    )
    return cap
