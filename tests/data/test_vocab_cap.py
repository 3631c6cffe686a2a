"""The vocabulary cap: a vocab_size the training text cannot support is capped once, with one warning line."""

from __future__ import annotations

import itertools
import json
import logging
import random
import re
from pathlib import Path

import pytest

from tetraformer.cli.commands import tokenizer_command
from tetraformer.data import load_tokenizer
from tetraformer.data.run_tokenizer import CAPPED, RECORD, prepare_run_tokenizer
from tetraformer.data.tokenizer import SPECIAL_VOCAB, TokenizerKind, word_splitter
from tetraformer.data.vocab_cap import MIN_COUNT, cap_vocab_size, text_inventory

SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po"]
WORDS = ["".join(parts) for parts in itertools.product(SYLLABLES, repeat=3)]  # 512 distinct words
RARE = ["".join(parts) for parts in itertools.product(["bu", "ze", "fo", "gi"], repeat=4)]  # 256 more, once each
BYTE_ALPHABET = 256  # byte-level BPE starts from every byte
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


def test_a_lower_min_count_counts_more_pieces_and_retrains(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """vocab_min_count is a setting: lowered, the cap counts pieces seen fewer times (a larger cap), the record
    keeps it and the tokenizer is retrained; the default is not written, so records from before it still match."""
    caplog.set_level(logging.INFO)
    corpus = write(tmp_path / "train.txt", 2)  # every word twice: nothing whole at 5, all of them at 2
    default = prepare(tmp_path, corpus, "wordpiece", 5000)
    prepare_run_tokenizer(tmp_path, [corpus], "wordpiece", 5000, "text", "utf-8", min_count=2)
    lowered = json.loads((tmp_path / RECORD).read_text())
    assert "vocab_min_count" not in default and lowered["vocab_min_count"] == 2
    assert default[CAPPED] < lowered[CAPPED] < 5000 and "vocab_min_count changed" in caplog.text
    assert all(len(load_tokenizer(tmp_path).tokenize(word)) == 1 for word in WORDS)


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


@pytest.mark.parametrize("kind", ["wordpiece", "unigram", "bpe"])
def test_the_cap_depends_on_the_text_not_its_order(kind: TokenizerKind) -> None:
    """The same lines in any order give the same cap."""
    texts = lines(1) + lines(MIN_COUNT)[:40]
    shuffled = random.Random(0).sample(texts, len(texts))
    assert cap_vocab_size(lambda: texts, kind, 5000, 5) == cap_vocab_size(lambda: shuffled, kind, 5000, 5) < 5000


@pytest.mark.parametrize(("kind", "floor"), [("bpe", BYTE_ALPHABET), ("wordpiece", 1), ("unigram", 1)])
def test_the_cap_keeps_the_alphabet_and_specials(kind: TokenizerKind, floor: int) -> None:
    """However few words repeat, the cap holds every special token and the trainer's starting alphabet."""
    texts = ["abc def\n"]  # 2 distinct words, none frequent: 7 characters
    specials = len(SPECIAL_VOCAB) + 100  # with T5 sentinels
    chars = len(set("abcdef"))
    cap = cap_vocab_size(lambda: texts, kind, 10_000, specials)
    assert cap >= specials + (floor if kind == "bpe" else chars)


def test_a_char_tokenizer_is_never_capped(caplog: pytest.LogCaptureFixture) -> None:
    """A char vocabulary is the characters seen: the request is already a ceiling."""
    assert cap_vocab_size(lambda: lines(1), "char", 5000, 5) == 5000 and cap_warnings(caplog) == []


def test_counting_stops_once_the_text_supports_the_size() -> None:
    """A text whose words seen MIN_COUNT+ times alone fill the size is read only that far: an endless one returns."""
    assert cap_vocab_size(lambda: itertools.cycle(lines(1)), "wordpiece", 300, 5) == 300
    inventory = text_inventory(itertools.cycle(lines(1)), word_splitter("wordpiece"), lambda inv: inv.frequent > 0)
    assert not inventory.complete and inventory.words == 2 + 8 * MIN_COUNT  # stopped at the line "the" hit 5


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_the_capped_vocabulary_holds_what_the_text_shows_often(
    kind: TokenizerKind, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Capped, a merging tokenizer keeps each word seen MIN_COUNT+ times whole and spells each word seen once from
    shared pieces, where the uncapped one, given the room, makes most of those rare words pieces of their own."""
    corpus = tmp_path / "train.txt"
    corpus.write_text("".join(lines(MIN_COUNT)) + " ".join(RARE) + "\n", encoding="utf-8")
    prepare(tmp_path / "capped", corpus, kind, 10_000)
    prepare(tmp_path / "kept", corpus, kind, 10_000, cap=False)
    [warning] = cap_warnings(caplog)
    words, frequent = map(int, re.search(r"has (\d+) distinct words, (\d+) of them", warning).groups())
    assert words - frequent >= len(RARE) and frequent >= len(WORDS)  # the trainer's words: BPE's keep their space
    capped, kept = load_tokenizer(tmp_path / "capped"), load_tokenizer(tmp_path / "kept")
    space = " " if kind == "bpe" else ""  # byte-level BPE's words mid-line carry their space

    def whole(tokenizer: object, words: list[str]) -> int:
        """How many of `words` the tokenizer keeps as one piece."""
        return sum(len(tokenizer.tokenize(space + word)) == 1 for word in words)

    assert whole(capped, WORDS) == len(WORDS) and whole(capped, RARE) == 0
    assert whole(kept, RARE) > len(RARE) // 2


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
