"""train_tokenizer / load_tokenizer: four kinds, saved and reloaded with AutoTokenizer; T5 sentinels."""

import json

import pytest
from transformers import AutoTokenizer, T5Tokenizer

from tetraformer.data import SPECIAL_TOKENS, DataError, load_tokenizer, train_tokenizer
from tetraformer.data.tokenizer import sentinel_ids
from tetraformer.errors import ConfigError

SAMPLE = "Hello  world,\tthis is Tetraformer.\nÜnïcode ✓ text: naïve café!\n"
CORPUS = SAMPLE + "The quick brown fox jumps over the lazy dog.\n" * 20 + "A small corpus for tests.\n" * 10
SIZES = {"bpe": 300, "wordpiece": 120, "unigram": 80, "char": 200}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(CORPUS, encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=list(SIZES))
def saved(request, corpus, tmp_path_factory):
    """(kind, directory) of a tokenizer trained on the corpus and saved."""
    out = tmp_path_factory.mktemp(request.param)
    train_tokenizer(corpus, request.param, SIZES[request.param], out)
    return request.param, out


def test_reloads_with_auto_tokenizer_and_has_special_tokens(saved) -> None:
    kind, out = saved
    assert (out / "tokenizer.json").is_file()
    tok = AutoTokenizer.from_pretrained(out)
    for attribute, token in SPECIAL_TOKENS.items():
        assert getattr(tok, attribute) == token
    ids = (tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id, tok.mask_token_id)
    assert ids == (0, 1, 2, 3, 4)
    assert (tok.cls_token_id, tok.sep_token_id) == (2, 3)
    assert 20 < len(tok) <= SIZES[kind]


def test_template_adds_bos_and_eos_and_pairs_get_type_ids(saved) -> None:
    tok = load_tokenizer(saved[1])
    ids = tok("the fox")["input_ids"]
    assert ids[0] == tok.bos_token_id and ids[-1] == tok.eos_token_id
    assert tok.bos_token_id not in tok("the fox", add_special_tokens=False)["input_ids"]
    pair = tok("the", "fox", return_token_type_ids=True)
    assert pair["token_type_ids"][0] == 0 and pair["token_type_ids"][-1] == 1


@pytest.mark.parametrize("kind", ["bpe", "char"])
def test_decoding_round_trips_text(kind, corpus, tmp_path) -> None:
    tok = train_tokenizer(corpus, kind, SIZES[kind], tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    for t in (tok, reloaded):
        assert t.decode(t(SAMPLE)["input_ids"], skip_special_tokens=True) == SAMPLE
        assert t.decode(t(SAMPLE, add_special_tokens=False)["input_ids"]) == SAMPLE


def test_char_gives_one_token_per_character(corpus, tmp_path) -> None:
    tok = train_tokenizer(corpus, "char", SIZES["char"], tmp_path)
    assert tok.tokenize(SAMPLE) == list(SAMPLE)


def test_char_vocabulary_is_the_characters_seen(corpus, tmp_path) -> None:
    tok = train_tokenizer(corpus, "char", 500, tmp_path)
    assert set(tok.get_vocab()) == set(CORPUS) | set(SPECIAL_TOKENS.values())


def test_lowercase(corpus, tmp_path) -> None:
    tok = train_tokenizer(corpus, "wordpiece", 120, tmp_path, lowercase=True)
    assert tok.tokenize("THE FOX") == tok.tokenize("the fox")


def test_trains_on_jsonl_field(write, tmp_path) -> None:
    path = write("d.jsonl", json.dumps({"body": "xyz xyz"}) + "\n")
    tok = train_tokenizer(path, "char", 50, tmp_path / "tok", field="body")
    assert {"x", "y", "z", " "} <= set(tok.get_vocab())
    assert "{" not in tok.get_vocab()


def test_bpe_vocab_too_small(corpus, tmp_path) -> None:
    with pytest.raises(ValueError, match="byte-level BPE needs vocab_size >= 261"):
        train_tokenizer(corpus, "bpe", 100, tmp_path)


def test_load_bare_tokenizer_json_fills_specials(saved) -> None:
    tok = load_tokenizer(saved[1] / "tokenizer.json")
    assert (tok.pad_token, tok.eos_token, tok.mask_token) == ("<pad>", "</s>", "<mask>")


def test_pad_falls_back_to_eos(corpus, tmp_path) -> None:
    train_tokenizer(corpus, "char", 200, tmp_path)
    config = tmp_path / "tokenizer.json"
    data = json.loads(config.read_text(encoding="utf-8"))
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "<pad>"]
    config.write_text(json.dumps(data), encoding="utf-8")
    tok = load_tokenizer(config)
    assert tok.pad_token == "</s>" and tok.pad_token_id == tok.eos_token_id


def test_missing_tokenizer_paths(tmp_path) -> None:
    with pytest.raises(DataError, match=r"nope: no such tokenizer file or directory"):
        load_tokenizer(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("x")
    with pytest.raises(DataError, match=r"empty: no tokenizer.json or tokenizer_config.json .*found: notes.md"):
        load_tokenizer(tmp_path / "empty")


def test_malformed_tokenizer_json(write) -> None:
    with pytest.raises(DataError, match=r"tokenizer\.json: could not load the tokenizer"):
        load_tokenizer(write("tokenizer.json", "{not json"))


def test_unknown_kind(corpus, tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown tokenizer kind 'sentencepiece'; expected one of bpe, wordpiece"):
        train_tokenizer(corpus, "sentencepiece", 100, tmp_path)


def test_bad_training_file_names_file_and_line(write, tmp_path) -> None:
    path = write("bad.txt", b"fine\n\xff\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: cannot decode byte 0xff"):
        train_tokenizer(path, "char", 50, tmp_path / "tok")


@pytest.mark.parametrize("kind", list(SIZES))
def test_extra_ids_reserve_t5_sentinels(kind, corpus, tmp_path) -> None:
    """<extra_id_0..2> get ids 5, 6, 7 after the usual specials; one token each, never produced by the text."""
    train_tokenizer(corpus, kind, SIZES[kind], tmp_path, extra_ids=3)
    tok = load_tokenizer(tmp_path)
    assert sentinel_ids(tok) == sentinel_ids(tok, 3) == [5, 6, 7]
    assert sentinel_ids(tok, 2) == [5, 6]
    assert (tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id, tok.mask_token_id) == (
        0,
        1,
        2,
        3,
        4,
    )
    assert {5, 6, 7} <= set(tok.all_special_ids) and len(tok) <= SIZES[kind]
    assert not {5, 6, 7} & set(tok(CORPUS)["input_ids"])
    ids = tok("the <extra_id_2> fox", add_special_tokens=False)["input_ids"]
    assert ids.count(7) == 1 and tok.convert_ids_to_tokens(7) == "<extra_id_2>"
    assert "extra_id" not in tok.decode(ids, skip_special_tokens=True)


def test_no_sentinels_by_default_and_too_few_are_an_error(corpus, tmp_path) -> None:
    train_tokenizer(corpus, "char", SIZES["char"], tmp_path / "none")
    with pytest.raises(DataError, match=r"none: the tokenizer has 0 sentinel tokens .* but 1 are needed"):
        sentinel_ids(load_tokenizer(tmp_path / "none"))
    tok = train_tokenizer(corpus, "char", SIZES["char"], tmp_path / "two", extra_ids=2)
    with pytest.raises(DataError, match="has 2 sentinel tokens .* but 5 are needed: train it with extra_ids >= 5"):
        sentinel_ids(tok, 5)
    with pytest.raises(ValueError, match="extra_ids must be >= 0"):
        train_tokenizer(corpus, "char", SIZES["char"], tmp_path / "bad", extra_ids=-1)


def test_sentinel_ids_of_a_local_hf_t5_tokenizer(tmp_path) -> None:
    """An HF T5 tokenizer's sentinels count down from the top of its vocabulary; found by name after reload."""
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)] + [(c, -3.0) for c in "abcdefgh"]
    sentinels = [(f"<extra_id_{i}>", 0.0) for i in reversed(range(4))]
    T5Tokenizer(vocab=pieces + sentinels, extra_ids=4).save_pretrained(str(tmp_path))
    tok = load_tokenizer(tmp_path)
    top = len(pieces) + 3
    assert sentinel_ids(tok) == [top, top - 1, top - 2, top - 3]
    assert tok("a <extra_id_1> b")["input_ids"].count(top - 1) == 1
    with pytest.raises(DataError, match="has 4 sentinel tokens"):
        sentinel_ids(tok, 100)


def test_chinese_chars_kept_in_their_words(tmp_path) -> None:
    """WordPiece puts each kanji apart by default (BERT's tokenize_chinese_chars); with it off, a morpheme's later
    kanji are `##` pieces of its word, so the pieces show where morphemes end."""
    corpus = tmp_path / "ja.txt"
    corpus.write_text("社会 民主 党 の 首相 が 社会 を 語る 。\n" * 20, encoding="utf-8")
    apart = train_tokenizer(corpus, "wordpiece", 200, tmp_path / "apart")
    kept = train_tokenizer(corpus, "wordpiece", 200, tmp_path / "kept", chinese_chars=False)
    assert apart.tokenize("社会 民主") == ["社", "会", "民", "主"]
    assert kept.tokenize("社会 民主") == ["社会", "民主"]
    assert kept.tokenize("社主") == ["社", "##主"]  # an unseen word: its second kanji continues it


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "unigram", "char"])
def test_zero_digits_make_numbers_share_pieces_by_length(kind, tmp_path) -> None:
    """With zero_digits every digit (full-width too) is read as 0, in training and after loading: numbers of one
    length encode alike, a number never seen in training is no rarer than one seen, and offsets still point into
    the original text."""
    corpus = tmp_path / "dates.txt"
    corpus.write_text("on 23 may 2005 and 19 june 1998 .\n" * 30, encoding="utf-8")
    train_tokenizer(corpus, kind, 300, tmp_path / "tok", zero_digits=True)
    tok = load_tokenizer(tmp_path / "tok")
    assert tok.tokenize("on 23 may 2005") == tok.tokenize("on 71 may 3164") == tok.tokenize("on ７１ may 3164")
    assert tok.unk_token not in tok.tokenize("on 71 may 3164")
    text = "on ７１ may"
    encoded = tok(text, return_offsets_mapping=True, add_special_tokens=False)
    pieces = tok.convert_ids_to_tokens(encoded["input_ids"])
    numbers = [text[a:b] for piece, (a, b) in zip(pieces, encoded["offset_mapping"], strict=True) if "0" in piece]
    assert "".join(numbers).strip() == "７１"  # the "0" pieces point at the full-width digits they were read from
    plain = train_tokenizer(corpus, kind, 300, tmp_path / "plain")
    assert plain.tokenize("on 23 may") != plain.tokenize("on 71 may")


@pytest.mark.parametrize("kind", ["bpe", "unigram", "char"])
def test_keeping_chinese_chars_is_wordpiece_only(kind, corpus, tmp_path) -> None:
    """The other kinds never split CJK ideographs apart: asking them to keep them together is an error."""
    with pytest.raises(ValueError, match="WordPiece setting"):
        train_tokenizer(corpus, kind, 300, tmp_path / "tok", chinese_chars=False)


def test_tokenizer_command_keeps_chinese_chars_when_told(tmp_path) -> None:
    """`tetraformer tokenizer train --no-tokenize-chinese-chars` keeps kanji in their words; with another --type it
    is one usage error."""
    from tetraformer.cli.commands import tokenizer_command

    corpus = tmp_path / "ja.txt"
    corpus.write_text("社会 民主 党 の 首相 が 社会 を 語る 。\n" * 20, encoding="utf-8")
    args = ["train", "--input", str(corpus), "--vocab-size", "200", "--no-tokenize-chinese-chars"]
    tokenizer_command([*args, "--type", "wordpiece", "--output", str(tmp_path / "kept")])
    assert load_tokenizer(tmp_path / "kept").tokenize("社会 民主") == ["社会", "民主"]
    with pytest.raises(ConfigError, match="--no-tokenize-chinese-chars needs --type wordpiece, not bpe"):
        tokenizer_command([*args, "--type", "bpe", "--output", str(tmp_path / "bpe")])


def test_tokenizer_command_reads_digits_as_zero_when_told(tmp_path) -> None:
    """`tetraformer tokenizer train --zero-digits` saves a tokenizer that reads any number as its zeros."""
    from tetraformer.cli.commands import tokenizer_command

    corpus = tmp_path / "dates.txt"
    corpus.write_text("on 23 may 2005 .\n" * 20, encoding="utf-8")
    args = ["train", "--input", str(corpus), "--vocab-size", "200", "--type", "wordpiece"]
    tokenizer_command([*args, "--zero-digits", "--output", str(tmp_path / "zero")])
    assert load_tokenizer(tmp_path / "zero").tokenize("on 71 may 3164") == ["on", "00", "may", "0000"]
