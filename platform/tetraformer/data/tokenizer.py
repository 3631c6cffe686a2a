"""Train BPE / WordPiece / Unigram / char tokenizers with `tokenizers`, and load saved ones."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from tetraformer.data.errors import DataError, check_choice
from tetraformer.data.files import FileSpec, resolve_files
from tetraformer.data.lines import iter_lines
from tetraformer.data.text import iter_documents, text_format
from tetraformer.data.wordpiece_trainer import train_wordpiece

logger = logging.getLogger(__name__)

TokenizerKind = Literal["bpe", "wordpiece", "unigram", "char"]

# RoBERTa's convention: cls is bos and sep is eos, so one set serves encoders, decoders and seq2seq
SPECIAL_TOKENS = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "mask_token": "<mask>",
    "cls_token": "<s>",
    "sep_token": "</s>",
}
SPECIAL_VOCAB = ["<pad>", "<unk>", "<s>", "</s>", "<mask>"]  # ids 0..4 in every trained tokenizer
SENTINEL = "<extra_id_{}>"  # T5's span-corruption sentinels: <extra_id_0>, <extra_id_1>, ...

# names other tokenizers use, to fill special tokens a bare tokenizer.json does not declare
_KNOWN_SPECIALS = {
    "pad_token": ("<pad>", "[PAD]", "<|pad|>", "<|padding|>"),
    "unk_token": ("<unk>", "[UNK]", "<|unk|>"),
    "bos_token": ("<s>", "<|startoftext|>", "<|begin_of_text|>", "[BOS]"),
    "eos_token": ("</s>", "<|endoftext|>", "<|end_of_text|>", "[EOS]"),
    "mask_token": ("<mask>", "[MASK]"),
    "cls_token": ("[CLS]", "<cls>", "<s>"),
    "sep_token": ("[SEP]", "<sep>", "</s>"),
}
_HF_TOKENIZER_FILES = ("tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer.model")
_BYTE_ALPHABET = pre_tokenizers.ByteLevel.alphabet()
UNLIMITED = 1 << 24  # a vocabulary size no text reaches: the trainer stops by another rule
DIGIT = r"\p{Nd}"  # a decimal digit of any script (Oniguruma's Unicode class)


def train_tokenizer(
    files: FileSpec,
    kind: TokenizerKind,
    vocab_size: int,
    output_dir: str | Path,
    lowercase: bool = False,
    field: str = "text",
    encoding: str = "utf-8",
    extra_ids: int = 0,
    chinese_chars: bool = True,
    zero_digits: bool = False,
) -> PreTrainedTokenizerFast:
    """Train a tokenizer on text files (JSONL/JSON/CSV/TSV: their `field`) and save it to output_dir.

    `extra_ids` > 0 reserves T5's sentinels <extra_id_0> .. <extra_id_{n-1}> as special tokens (ids 5, 6, ...
    right after SPECIAL_VOCAB, counted in vocab_size): never split, never learned from the text. `chinese_chars`
    False keeps CJK ideographs inside their words (WordPiece only; see `_wordpiece`). `zero_digits` reads every
    decimal digit as 0 (`read_digits_as_zero`), in training and in every later encoding.
    """
    if extra_ids < 0:
        raise ValueError(f"extra_ids must be >= 0, got {extra_ids}")
    sentinels = [SENTINEL.format(i) for i in range(extra_ids)]
    specials = SPECIAL_VOCAB + sentinels
    backend, trainer = _untrained(kind, vocab_size, lowercase, specials, chinese_chars, zero_digits)
    paths = resolve_files(files)
    if trainer is None:  # WordPiece: trained repeatably (`wordpiece_trainer`)
        train_wordpiece(backend, lambda: training_texts(paths, field, encoding), vocab_size, specials)
    else:
        backend.train_from_iterator(training_texts(paths, field, encoding), trainer=trainer)
    backend.post_processor = _special_template(kind)
    extra = {"additional_special_tokens": sentinels} if sentinels else {}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, clean_up_tokenization_spaces=False, **SPECIAL_TOKENS, **extra
    )
    tokenizer.save_pretrained(str(output_dir))
    logger.info("trained a %s tokenizer with %d tokens, saved to %s", kind, len(tokenizer), output_dir)
    return tokenizer


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """Load a tokenizer directory (tokenizer.json or HF files) or a tokenizer.json file; pad falls back to eos."""
    path = Path(path)
    if not path.exists():
        raise DataError("no such tokenizer file or directory", path)
    try:
        tokenizer = _load(path)
    except DataError:
        raise
    except Exception as err:  # tokenizers raises a bare Exception for malformed files
        raise DataError(f"could not load the tokenizer ({type(err).__name__}: {err})", path) from err
    _fill_special_tokens(tokenizer)
    _ensure_pad_token(tokenizer, path)
    return tokenizer


def sentinel_ids(tokenizer: PreTrainedTokenizerBase, n: int | None = None) -> list[int]:
    """Ids of T5's sentinels <extra_id_0>, <extra_id_1>, ...: the first `n`, or all it has (at least one).

    Works on any tokenizer that holds them by name: a trained one (`extra_ids`, ids counting up) or an HF T5
    tokenizer (ids counting down from the top of the vocabulary).
    """
    vocab = tokenizer.get_vocab()
    available = 0
    while SENTINEL.format(available) in vocab:
        available += 1
    wanted = available if n is None else n
    if wanted > available or (n is None and available == 0):
        needed = max(wanted, 1)
        raise DataError(
            f"the tokenizer has {available} sentinel tokens (<extra_id_0>, <extra_id_1>, ...) but {needed} "
            f"are needed: train it with extra_ids >= {needed} or use a tokenizer that has them",
            getattr(tokenizer, "name_or_path", None) or None,
        )
    return [vocab[SENTINEL.format(i)] for i in range(wanted)]


def decoder_start_token(tokenizer: PreTrainedTokenizerBase) -> int:
    """First decoder input of an encoder-decoder: BOS if the tokenizer has one, else PAD (as T5 does)."""
    for token_id in (tokenizer.bos_token_id, tokenizer.pad_token_id):
        if token_id is not None:
            return token_id
    return 0


def _load(path: Path) -> PreTrainedTokenizerBase:
    """AutoTokenizer for an HF tokenizer folder, PreTrainedTokenizerFast for a bare tokenizer.json."""
    if path.is_file():
        return PreTrainedTokenizerFast(tokenizer_file=str(path), clean_up_tokenization_spaces=False)
    if any((path / name).is_file() for name in _HF_TOKENIZER_FILES):
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if (path / "tokenizer.json").is_file():
        return _load(path / "tokenizer.json")
    found = ", ".join(sorted(p.name for p in path.iterdir())) or "nothing"
    raise DataError(f"no tokenizer.json or tokenizer_config.json in this directory (found: {found})", path)


def _fill_special_tokens(tokenizer: PreTrainedTokenizerBase) -> None:
    """Set unset special-token attributes from well-known names among the tokenizer's special tokens."""
    specials = {token.content for token in tokenizer.added_tokens_decoder.values() if token.special}
    for attribute, names in _KNOWN_SPECIALS.items():
        if getattr(tokenizer, attribute) is None:
            name = next((n for n in names if n in specials), None)
            if name is not None:
                setattr(tokenizer, attribute, name)


def _ensure_pad_token(tokenizer: PreTrainedTokenizerBase, path: Path) -> None:
    """Use eos as the pad token when there is no pad token; an error when there is neither."""
    if tokenizer.pad_token is not None:
        return
    if tokenizer.eos_token is None:
        raise DataError("the tokenizer has neither a pad nor an eos token; add a pad token", path)
    logger.info("tokenizer at %s has no pad token; using eos %r", path, tokenizer.eos_token)
    tokenizer.pad_token = tokenizer.eos_token


def training_texts(paths: list[Path], field: str, encoding: str) -> Iterator[str]:
    """Plain-text files line by line (newlines kept, so they get tokens); record files by field."""
    for path in paths:
        if text_format(path) == "text":
            yield from (line for _, line in iter_lines(path, encoding))
        else:
            yield from (str(doc["text"]) for doc in iter_documents(path, field=field, encoding=encoding))


def word_splitter(
    kind: TokenizerKind, lowercase: bool = False, chinese_chars: bool = True, zero_digits: bool = False
) -> Callable[[str], list[str]]:
    """The words a trainer of this kind learns pieces from: its normaliser, then its pre-tokenizer, on a text."""
    backend, _ = _untrained(kind, 1 << 16, lowercase, SPECIAL_VOCAB, chinese_chars, zero_digits)
    normalizer, pre_tokenizer = backend.normalizer, backend.pre_tokenizer

    def split(text: str) -> list[str]:
        normalized = normalizer.normalize_str(text) if normalizer is not None else text
        return [word for word, _ in pre_tokenizer.pre_tokenize_str(normalized)]

    return split


def merged_vocab_size(
    texts: Callable[[], Iterable[str]],
    kind: TokenizerKind,
    specials: int,
    min_count: int,
    lowercase: bool = False,
    chinese_chars: bool = True,
    zero_digits: bool = False,
) -> int:
    """The vocabulary a merging trainer of this kind learns from `texts()` when it merges only pairs seen
    `min_count`+ times and has no size limit: the special tokens, its alphabet and those merges. BPE and WordPiece
    train exactly this vocabulary when given this size; Unigram, which does not merge, gets it as an estimate."""
    names = [f"<special_{i}>" for i in range(specials)]
    backend, trainer = _untrained(kind, UNLIMITED, lowercase, names, chinese_chars, zero_digits)
    if kind == "wordpiece":
        train_wordpiece(backend, texts, UNLIMITED, names, min_count)
        return backend.get_vocab_size()
    if kind == "unigram":  # count the merges over Unigram's own words, from its characters
        backend.model, trainer = models.BPE(), trainers.BpeTrainer(vocab_size=UNLIMITED, special_tokens=names)
    trainer.min_frequency = min_count
    trainer.show_progress = False
    backend.train_from_iterator(texts(), trainer=trainer)
    return backend.get_vocab_size()


def _untrained(
    kind: TokenizerKind,
    vocab_size: int,
    lowercase: bool,
    specials: list[str],
    chinese_chars: bool = True,
    zero_digits: bool = False,
) -> tuple[Tokenizer, trainers.Trainer | None]:
    """An untrained tokenizer pipeline and its trainer for one kind, reserving `specials` first; no trainer for
    WordPiece, which `train_wordpiece` trains."""
    check_choice("tokenizer kind", kind, TokenizerKind)
    if kind == "wordpiece":
        tokenizer, trainer = _wordpiece(lowercase, chinese_chars), None
    elif not chinese_chars:
        raise ValueError(
            f"keeping Chinese characters together is a WordPiece setting; a {kind} tokenizer never splits them"
        )
    else:
        builders = {"bpe": _bpe, "unigram": _unigram, "char": _char}
        tokenizer, trainer = builders[kind](vocab_size, lowercase, specials)
    if zero_digits:
        read_digits_as_zero(tokenizer)
    return tokenizer, trainer


def read_digits_as_zero(tokenizer: Tokenizer) -> None:
    """Append a normaliser step that makes every decimal digit (any script's: "7", "７") a "0": numbers share their
    pieces by length ("2005" and "1998" are both "0000"), as NER taggers since Lample et al. (2016) read them.
    One character for one, so offsets still point into the original text."""
    steps = [tokenizer.normalizer] if tokenizer.normalizer is not None else []
    tokenizer.normalizer = normalizers.Sequence([*steps, normalizers.Replace(Regex(DIGIT), "0")])


def _bpe(vocab_size: int, lowercase: bool, specials: list[str]) -> tuple[Tokenizer, trainers.Trainer]:
    """Byte-level BPE like GPT-2: any text encodes (no unk) and decodes back exactly."""
    minimum = len(_BYTE_ALPHABET) + len(specials)
    if vocab_size < minimum:
        raise ValueError(f"byte-level BPE needs vocab_size >= {minimum} (256 bytes + specials), got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.Lowercase() if lowercase else None
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=_BYTE_ALPHABET,
        show_progress=False,
    )
    return tokenizer, trainer


def _wordpiece(lowercase: bool, chinese_chars: bool = True) -> Tokenizer:
    """WordPiece with BERT's normaliser and pre-tokenizer (whitespace is not kept). The normaliser puts each CJK
    ideograph apart, as a word of its own (BERT's `tokenize_chinese_chars`); `chinese_chars` False keeps them in
    their words, so a kanji after a word's first piece is `##`-marked, as Japanese BERTs over MeCab words do."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase, handle_chinese_chars=chinese_chars)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def _unigram(vocab_size: int, lowercase: bool, specials: list[str]) -> tuple[Tokenizer, trainers.Trainer]:
    """SentencePiece-style Unigram: NFKC normalisation and Metaspace (▁) word boundaries."""
    tokenizer = Tokenizer(models.Unigram())
    steps = [normalizers.NFKC(), normalizers.Lowercase()] if lowercase else [normalizers.NFKC()]
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=specials, unk_token="<unk>", show_progress=False
    )
    return tokenizer, trainer


def _char(vocab_size: int, lowercase: bool, specials: list[str]) -> tuple[Tokenizer, trainers.Trainer]:
    """Every character its own token; the vocabulary is the characters seen (most frequent first)."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Lowercase() if lowercase else None
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    return tokenizer, trainer


def _special_template(kind: TokenizerKind) -> processors.PostProcessor:
    """`<s> A </s>` for one text and `<s> A </s> B </s>` (type ids 0 / 1) for a pair."""
    template = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> $B:1 </s>:1",
        special_tokens=[("<s>", SPECIAL_VOCAB.index("<s>")), ("</s>", SPECIAL_VOCAB.index("</s>"))],
    )
    if kind == "bpe":  # keep byte-level offsets trimmed of the leading-space marker
        return processors.Sequence([processors.ByteLevel(trim_offsets=True), template])
    return template


def tokenizer_digest(tokenizer: Any) -> str:
    """A hash of what the tokenizer encodes with (its model, normaliser, pre-tokenizer, added tokens), not where
    it is saved: a checkpoint's copy of a run's tokenizer keys the same stores."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        for setting in ("truncation", "padding"):  # call-time settings, not the encoding
            spec.pop(setting, None)
    else:
        spec = {"class": type(tokenizer).__name__, "vocab": sorted(tokenizer.get_vocab().items())}
    spec["eos_token_id"] = tokenizer.eos_token_id
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]
