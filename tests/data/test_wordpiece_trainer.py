"""WordPiece training is repeatable: the same text gives the same pieces and ids every time, every word encodes."""

import json
import random

import pytest

from tetraformer.data import train_tokenizer
from tetraformer.data.tokenizer import SPECIAL_VOCAB
from tetraformer.data.wordpiece_trainer import MARK, wordpiece_vocabulary


@pytest.fixture(scope="module")
def tied_corpus(tmp_path_factory):
    """Many words seen equally often: the merges tie, as in a small real text's rare words."""
    rng = random.Random(0)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDE") for _ in range(rng.randint(3, 9))) for _ in range(400)
    ]
    lines = [" ".join(rng.sample(words, 12)) + " ." for _ in range(200)]
    path = tmp_path_factory.mktemp("tied") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_trainings_on_one_text_give_the_same_tokenizer(tied_corpus, tmp_path) -> None:
    """The stock trainer numbered pieces in hash-map order: two trainings here differed in pieces and ids."""
    saved = []
    for i in range(3):
        train_tokenizer(tied_corpus, "wordpiece", 600, tmp_path / str(i))
        saved.append((tmp_path / str(i) / "tokenizer.json").read_bytes())
    assert saved[0] == saved[1] == saved[2]


def test_every_word_encodes_from_its_pieces(tied_corpus, tmp_path) -> None:
    tok = train_tokenizer(tied_corpus, "wordpiece", 600, tmp_path)
    vocab = tok.get_vocab()
    assert len(vocab) == 600
    assert [vocab[s] for s in SPECIAL_VOCAB] == list(range(len(SPECIAL_VOCAB)))
    assert not any(MARK in piece for piece in vocab)
    for word in set(tied_corpus.read_text(encoding="utf-8").split()):
        pieces = tok.tokenize(word)
        assert tok.unk_token not in pieces
        assert not pieces[0].startswith("##") and all(p.startswith("##") for p in pieces[1:])
        assert pieces[0] + "".join(p[2:] for p in pieces[1:]) == word


def test_frequent_words_get_whole_pieces(tmp_path) -> None:
    path = tmp_path / "text.txt"
    path.write_text("the cat sat on the mat with the hat\n" * 30 + "zebra\n", encoding="utf-8")
    tok = train_tokenizer(path, "wordpiece", 200, tmp_path / "tok")
    assert tok.tokenize("the cat sat") == ["the", "cat", "sat"]
    assert tok.tokenize("mate") == ["mat", "##e"] and tok.tokenize("zebrae") == ["zebra", "##e"]
    assert tok.tokenize("cats") == [tok.unk_token]  # no word of the text has an "s" inside


def test_the_word_mark_in_the_text_is_dropped_with_other_private_use_characters(tmp_path) -> None:
    path = tmp_path / "text.txt"
    path.write_text(f"plain words and a mark{MARK}inside\n" * 5, encoding="utf-8")
    tok = train_tokenizer(path, "wordpiece", 100, tmp_path / "tok")
    assert not any(MARK in piece for piece in tok.get_vocab())
    assert tok.unk_token not in tok.tokenize(f"markinside mark{MARK}inside")


def test_bpe_tokens_read_back_as_pieces() -> None:
    """Marked tokens start words, others continue them; every character starts a word, those seen inside words also
    continue them; duplicates are skipped."""
    learnt = ["a", "b", MARK, MARK + "a", "ab", MARK + "ab", MARK + "b"]
    specials = ["<pad>", "<unk>"]
    vocab = wordpiece_vocabulary(learnt, {"a", "b"}, 100, specials)
    assert list(vocab) == [*specials, "a", "##a", "b", "##b", "##ab", "ab"]
    assert list(vocab.values()) == list(range(8))
    assert list(wordpiece_vocabulary(learnt, {"a", "b"}, 7, specials)) == [*specials, "a", "##a", "b", "##b", "##ab"]
    assert list(wordpiece_vocabulary(learnt, {"b"}, 100, specials)) == [*specials, "a", "b", "##b", "##ab", "ab"]


def test_saved_vocabulary_is_wordpiece(tied_corpus, tmp_path) -> None:
    train_tokenizer(tied_corpus, "wordpiece", 300, tmp_path)
    model = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    assert model["type"] == "WordPiece" and model["continuing_subword_prefix"] == "##"
