"""WordPiece vocabularies that come out the same on every training.

What the stock one lacks: `tokenizers`' WordPieceTrainer numbers the `##` pieces in hash-map order and breaks ties
between equally frequent merges by those numbers, so two trainings on one text learn different pieces and ids
(huggingface/tokenizers#1794; on 3,000 English sentences at 4,000 pieces, two pairs of trainings differed in 4 and
in 76 pieces, the first pair in 1,776 ids), and one seed gave two different runs. Its BPE trainer, given only plain
characters, numbers them in sorted order and is repeatable. So the words are marked at their start (U+E000 before
each one), BPE learns merges over them, and each learnt token is read back as a WordPiece piece: a marked token is a
word-initial piece, any other a `##` piece. The vocabulary is the special tokens, then every character of the text
as a word-initial piece and, if the text has it inside a word, as a `##` piece (sorted), then the pieces in the
order BPE learnt them, up to the size asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

MARK = "\ue000"  # a private-use character, put before each word while training (BERT's normaliser drops it from text)
CONTINUATION = "##"


def train_wordpiece(
    backend: Tokenizer,
    texts: Callable[[], Iterable[str]],
    vocab_size: int,
    specials: list[str],
    min_count: int = 0,
) -> None:
    """Give `backend` (a WordPiece pipeline: model, normaliser and pre-tokenizer set) the vocabulary the texts
    support, at most `vocab_size` pieces with the special tokens first (ids 0, 1, ...), unless the alphabet alone is
    larger; with `min_count`, only pieces merged from pairs the text shows that many times. `texts()` gives the
    training texts afresh: they are read twice."""
    # the alphabet of the words without their first character: the characters seen inside words (at the library's
    # speed; a Python loop over the words took twice as long)
    inner = set(_bpe_tokens(backend, pre_tokenizers.Split(Regex(r"\A."), behavior="removed"), texts(), 1))
    # BPE's tokens are the characters C, the mark and the merges; a merge gives a new piece unless it is the mark
    # and a character, so vocab_size + C + 1 tokens are enough, and 2 * vocab_size + 1 when C is under vocab_size
    word_start = pre_tokenizers.Metaspace(replacement=MARK, prepend_scheme="always", split=False)
    learnt = _bpe_tokens(backend, word_start, texts(), 2 * vocab_size + 1, min_count)
    vocab = wordpiece_vocabulary(learnt, inner, vocab_size, specials)
    backend.model = models.WordPiece(vocab, unk_token=backend.model.unk_token)
    backend.add_special_tokens(specials)


def _bpe_tokens(
    backend: Tokenizer, step: pre_tokenizers.PreTokenizer, texts: Iterable[str], size: int, min_count: int = 0
) -> list[str]:
    """The tokens, in id order, of a BPE trainer run over `backend`'s words with `step` applied to each word,
    merging only pairs seen `min_count`+ times."""
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = backend.normalizer
    bpe.pre_tokenizer = pre_tokenizers.Sequence([backend.pre_tokenizer, step])
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=min_count, show_progress=False)
    bpe.train_from_iterator(texts, trainer=trainer)
    vocab = bpe.get_vocab()
    return sorted(vocab, key=vocab.__getitem__)


def wordpiece_vocabulary(learnt: list[str], inner: set[str], vocab_size: int, specials: list[str]) -> dict[str, int]:
    """Piece -> id from BPE's tokens over marked words, in id order, and the characters seen inside words
    (`inner`): see the module docstring."""
    chars = sorted({c for token in learnt for c in token if c != MARK})
    alphabet = [
        piece for c in chars for piece in (c, CONTINUATION + c) if not piece.startswith(CONTINUATION) or c in inner
    ]
    vocab = dict.fromkeys([*specials, *alphabet])
    for token in learnt:
        if len(vocab) >= vocab_size:
            break
        if len(token) > 1:  # characters are in the alphabet already
            vocab.setdefault(token[1:] if token.startswith(MARK) else CONTINUATION + token)
    return {piece: index for index, piece in enumerate(vocab)}
