"""The vocabulary cap: a vocab_size the training text cannot support is capped once, with one warning line."""

from __future__ import annotations

import itertools
import json
import logging
import random
from pathlib import Path

import pytest

from tetraformer.cli.commands import tokenizer_command
from tetraformer.data import load_tokenizer
from tetraformer.data.run_tokenizer import CAPPED, RECORD, prepare_run_tokenizer
from tetraformer.data.tokenizer import SPECIAL_VOCAB, TokenizerKind, word_splitter
from tetraformer.data.vocab_cap import (
    BYTE_ALPHABET,
    MIN_COUNT,
    cap_vocab_size,
    supported_vocab_size,
    text_inventory,
)

SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po"]
WORDS = ["".join(parts) for parts in itertools.product(SYLLABLES, repeat=3)]  # 512 distinct words
CAP_LOGGER = "tetraformer.data.vocab_cap"


def lines(times: int) -> list[str]:
    """Each of the 512 words `times` times, eight to a line, plus a few common words on every line."""
    words = WORDS * times
    return [" ".join(["the", *words[i : i + 8], "and"]) + "\n" for i in range(0, len(words), 8)]


def write(path: Path, times: int) -> Path:
    """A corpus file of `lines(times)`."""
    path.write_text("".join(lines(times)), encoding="utf-8")
    return path


def cap_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The cap's warning lines logged so far."""
    return [r.getMessage() for r in caplog.records if r.name == CAP_LOGGER and r.levelno == logging.WARNING]


def prepare(directory: Path, corpus: Path, kind: TokenizerKind, size: int, cap: bool = True) -> dict:
    """Prepare the run tokenizer in `directory`; its training record."""
    prepare_run_tokenizer(directory, [corpus], kind, size, "text", "utf-8", vocab_cap=cap)
    return json.loads((directory / RECORD).read_text())


@pytest.mark.parametrize("kind", ["wordpiece", "unigram", "bpe"])
def test_rare_words_cap_the_vocabulary_with_one_warning(
    kind: TokenizerKind, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """512 words seen once each support far fewer pieces than 2,000: the size is capped, recorded and warned of once,
    and the saved tokenizer is no larger than the cap."""
    caplog.set_level(logging.INFO)
    record = prepare(tmp_path, write(tmp_path / "train.txt", 1), kind, 2000)
    [warning] = cap_warnings(caplog)
    cap = record[CAPPED]
    assert cap < 2000 and record["vocab_size"] == 2000
    assert "data.vocab_size=2000" in warning and f"capping the vocabulary to {cap} " in warning
    assert "--data.vocab_cap false" in warning and "\n" not in warning
    assert len(load_tokenizer(tmp_path)) <= cap


@pytest.mark.parametrize("kind", ["wordpiece", "unigram", "bpe"])
def test_text_that_supports_the_size_is_not_capped(
    kind: TokenizerKind, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every word seen MIN_COUNT times supports the requested size: no cap, no warning, nothing recorded."""
    caplog.set_level(logging.INFO)
    size = BYTE_ALPHABET + 200 if kind == "bpe" else 200
    record = prepare(tmp_path, write(tmp_path / "train.txt", MIN_COUNT), kind, size)
    assert cap_warnings(caplog) == [] and CAPPED not in record
    assert len(load_tokenizer(tmp_path)) <= size


def test_resume_reuses_the_capped_tokenizer_without_counting_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Preparing again with the same settings and files keeps the saved tokenizer and its size, warning no more."""
    caplog.set_level(logging.INFO)
    corpus = write(tmp_path / "train.txt", 1)
    prepare(tmp_path / "tok", corpus, "wordpiece", 2000)
    written, size = (tmp_path / "tok" / "tokenizer.json").stat().st_mtime_ns, len(load_tokenizer(tmp_path / "tok"))
    prepare(tmp_path / "tok", corpus, "wordpiece", 2000)
    assert (tmp_path / "tok" / "tokenizer.json").stat().st_mtime_ns == written
    assert len(load_tokenizer(tmp_path / "tok")) == size and len(cap_warnings(caplog)) == 1


def test_opting_out_keeps_the_size_and_retrains(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """vocab_cap off trains the requested size quietly, recorded as a setting: switching it retrains."""
    caplog.set_level(logging.INFO)
    corpus = write(tmp_path / "train.txt", 1)
    capped = prepare(tmp_path, corpus, "wordpiece", 2000)
    kept = prepare(tmp_path, corpus, "wordpiece", 2000, cap=False)
    assert kept["vocab_cap"] is False and CAPPED not in kept and "vocab_cap changed" in caplog.text
    assert len(load_tokenizer(tmp_path)) > capped[CAPPED] and len(cap_warnings(caplog)) == 1
    assert "vocab_cap" not in capped  # the default is not written: records from before the cap still match


def test_the_cap_depends_on_the_text_not_its_order() -> None:
    """The same lines in any order give the same cap."""
    texts = lines(1) + lines(MIN_COUNT)[:40]
    shuffled = random.Random(0).sample(texts, len(texts))
    assert cap_vocab_size(texts, "unigram", 5000, 5) == cap_vocab_size(shuffled, "unigram", 5000, 5) < 5000


@pytest.mark.parametrize(("kind", "floor"), [("bpe", BYTE_ALPHABET), ("wordpiece", 2), ("unigram", 1)])
def test_the_cap_keeps_the_alphabet_and_specials(kind: TokenizerKind, floor: int) -> None:
    """However few words repeat, the cap holds every special token and the trainer's starting alphabet."""
    texts = ["abc def\n"]  # 2 distinct words, none frequent: 7 characters
    specials = len(SPECIAL_VOCAB) + 100  # with T5 sentinels
    chars = len(set("abcdef"))
    cap = cap_vocab_size(texts, kind, 10_000, specials)
    assert cap >= specials + (floor if kind == "bpe" else floor * chars)


def test_a_char_tokenizer_is_never_capped(caplog: pytest.LogCaptureFixture) -> None:
    """A char vocabulary is the characters seen: the request is already a ceiling."""
    assert cap_vocab_size(lines(1), "char", 5000, 5) == 5000 and cap_warnings(caplog) == []


def test_counting_stops_once_the_text_supports_the_size() -> None:
    """A text that supports the size is read only until it does: an endless one still returns."""
    endless = itertools.cycle(lines(1))
    assert cap_vocab_size(endless, "wordpiece", 300, 5) == 300
    inventory = text_inventory(itertools.cycle(lines(1)), word_splitter("wordpiece"), lambda inv: inv.frequent > 0)
    assert not inventory.complete and inventory.words == 2 + 8 * MIN_COUNT  # stopped at the line "the" hit 5


def test_every_frequent_word_can_be_spelt_whole() -> None:
    """The pieces past the alphabet are the merges that make each word seen MIN_COUNT+ times whole, so a text whose
    words all repeat (a toy corpus) keeps them whole; words seen fewer times add nothing."""
    frequent = text_inventory(lines(MIN_COUNT), word_splitter("unigram"))
    rare = text_inventory(lines(MIN_COUNT - 1), word_splitter("unigram"))
    split = word_splitter("unigram")
    spelt = sum(len(word) - 1 for word in {word for line in lines(1) for word in split(line)})  # each seen 5+ times
    assert supported_vocab_size(frequent, "unigram", 0) - frequent.chars == frequent.spelling == spelt
    assert rare.frequent == 2 and rare.words == frequent.words == len(WORDS) + 2


def test_the_tokenizer_command_caps_unless_told_not_to(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`tetraformer tokenizer train` caps as a run does, naming its own options; --no-vocab-cap keeps the size."""
    caplog.set_level(logging.INFO)
    corpus = write(tmp_path / "train.txt", 1)
    args = ["train", "--input", str(corpus), "--type", "wordpiece", "--vocab-size", "2000"]
    tokenizer_command([*args, "--output", str(tmp_path / "capped")])
    [warning] = cap_warnings(caplog)
    assert warning.startswith("--vocab-size=2000 ") and warning.endswith("--no-vocab-cap keeps 2000")
    tokenizer_command([*args, "--no-vocab-cap", "--output", str(tmp_path / "kept")])
    assert len(cap_warnings(caplog)) == 1
    assert len(load_tokenizer(tmp_path / "capped")) < len(load_tokenizer(tmp_path / "kept"))
