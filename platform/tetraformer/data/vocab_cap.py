"""The vocabulary a training text supports: a requested size past it is capped, with one warning line.

Why cap: a sub-word trainer given more slots than the text's frequent words need spends the rest on rare words
(most words of a small text are seen once): each gets pieces of its own, learnt from one or two examples, and
related words share nothing ("Edelsteinlupen" may become one piece, not "Edelstein" + "lupen"). Sennrich & Zhang (2019,
"Revisiting Low-Resource Neural Machine Translation") found small vocabularies best on small corpora for this.

The rule: a piece earns its slot once the text shows it MIN_COUNT times (enough to learn an embedding). The supported
size is what a merging trainer of the tokenizer's kind learns when it merges only pairs seen MIN_COUNT+ times (the
`min_frequency` of `tokenizers`' BPE trainer): the special tokens, the trainer's alphabet and those merges
(`tokenizer.merged_vocab_size`). Every word seen MIN_COUNT+ times ends up whole (each pair inside it is seen at
least as often as the word), so does every frequent part of rarer words, and nothing seen fewer times does; the
next merge would serve only such rarer strings. BPE and WordPiece trained at that size learn exactly those pieces;
Unigram, which prunes instead of merging, gets the same count, over its own words, as its ceiling. An earlier rule
counted each frequent word's merges as if no word shared any (len - 1 per word): on 54 of Grimm's tales (5,030
distinct words, 1,548 seen 5+ times) it allowed 7,949 BPE pieces, more than the text has words, where the text
shows 3,094 pieces 5+ times (special tokens included).

MIN_COUNT is the default; `--data.vocab_min_count` sets another per run. The English NER books (3,000 sentences)
show 3,025 WordPiece pieces 5+ times and 4,515 3+ times; capped at the first, their tagger read unseen books worse
than with 4,000 pieces, so `conll_en.yaml` counts from 3.

The count is of the text alone, so the same text gives the same cap. Large text is not capped: Reuters R8's 4,936
training texts support 10,852 WordPiece pieces, the 45,000 de_en dictionary pairs (both sides) 18,152 Unigram ones;
the first 8,000 of those pairs support 4,624, so 8,000 is capped there. A text is read only until its words seen
MIN_COUNT+ times alone fill the requested size (each is a piece of its own), so a large corpus costs one partial
pass; a smaller one is read twice more (three times for WordPiece) by the counting trainer.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tetraformer.data.tokenizer import TokenizerKind, merged_vocab_size, word_splitter

log = logging.getLogger(__name__)

MIN_COUNT = 5  # times the text must show a piece (a word, a part of words) before it deserves a slot


@dataclass(frozen=True)
class TextInventory:
    """What a training text offers a tokenizer: its distinct words and those seen MIN_COUNT times."""

    words: int
    frequent: int
    complete: bool = True  # False: counting stopped once `enough` said so


def text_inventory(
    texts: Iterable[str],
    split: Callable[[str], list[str]],
    enough: Callable[[TextInventory], bool] | None = None,
    min_count: int = MIN_COUNT,
) -> TextInventory:
    """Count the texts' distinct words (as `split` gives them) and those seen `min_count`+ times; stop early
    (complete=False) once `enough` says the counts so far suffice."""
    counts: Counter[str] = Counter()
    frequent = 0
    for text in texts:
        for word in split(text):
            counts[word] += 1
            frequent += counts[word] == min_count
        if enough is not None and enough(TextInventory(len(counts), frequent, complete=False)):
            return TextInventory(len(counts), frequent, complete=False)
    return TextInventory(len(counts), frequent)


def cap_vocab_size(
    texts: Callable[[], Iterable[str]],
    kind: TokenizerKind,
    vocab_size: int,
    specials: int,
    lowercase: bool = False,
    option: str = "data.vocab_size",
    opt_out: str = "--data.vocab_cap false",
    chinese_chars: bool = True,
    zero_digits: bool = False,
    min_count: int = MIN_COUNT,
) -> int:
    """`vocab_size`, or the smaller size the texts support, counting the pieces they show `min_count`+ times (one
    warning line naming `option`, the sizes and why). `texts()` gives the training texts afresh each time.

    A char tokenizer is never capped: its vocabulary is the characters seen, and a larger request is a ceiling.
    """
    if kind == "char":
        return vocab_size
    split = word_splitter(kind, lowercase, chinese_chars, zero_digits)
    inventory = text_inventory(texts(), split, lambda inv: specials + inv.frequent >= vocab_size, min_count)
    if not inventory.complete:
        return vocab_size
    cap = merged_vocab_size(texts, kind, specials, min_count, lowercase, chinese_chars, zero_digits)
    if cap >= vocab_size:
        return vocab_size
    log.warning(
        "%s=%d but the training text has %d distinct words, %d of them seen %d+ times, and %d pieces it shows %d+ "
        "times (special tokens and the %s trainer's alphabet included): capping the vocabulary to %d so the rarer "
        "words are spelt from shared pieces instead of getting their own from one or two examples; %s keeps %d",
        option,
        vocab_size,
        inventory.words,
        inventory.frequent,
        min_count,
        cap,
        min_count,
        kind,
        cap,
        opt_out,
        vocab_size,
    )
    return cap
