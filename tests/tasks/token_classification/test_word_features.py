"""Word features: values counted on the training words, unseen ones apart, every subword reads its word's rows, and
checkpoints carry them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tasks.token_classification.model import build_token_classifier
from tasks.token_classification.windows import SentenceWindows
from tasks.token_classification.word_features import (
    FEATURES,
    NO_FEATURE,
    FeatureVocabulary,
    check_features,
    piece_features,
    word_shape,
)
from tetraformer.cli import main
from tetraformer.core import TransformerConfig
from tetraformer.data import train_tokenizer
from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.errors import ConfigError

NAMES = ("lower", "prefix2", "suffix3", "shape")


def test_word_shape_collapses_runs_of_character_classes() -> None:
    """Case, digits, punctuation and the Japanese scripts are classes; a run of one class is one mark."""
    assert [word_shape(w) for w in ("Alice", "NASA", "1984", "U.S.", "e-mail")] == ["Xx", "X", "d", "X.X.", "x-x"]
    assert [word_shape(w) for w in ("東京タワー", "ひらがな", "3月")] == ["CK", "h", "dC"]


def test_values_the_training_words_do_not_show_read_their_features_unseen_row() -> None:
    """Kept values have rows of their own inside their feature's part; a rare or unseen value reads the part's first
    row, never another word's; row 0 is nobody's."""
    words = [["Alice", "saw", "the", "cat"], ["the", "cat", "saw", "Bob"], ["Alice", "ran"]]
    vocabulary = FeatureVocabulary.count(iter(words), NAMES, min_count=2)  # read once, for every feature
    assert vocabulary.values["suffix3"] == ["cat", "ice", "saw", "the"]  # "Alice" -> "ice", twice
    assert vocabulary.values["lower"] == ["alice", "cat", "saw", "the"]  # by count, then by value; "ran" once
    assert vocabulary.rows == 1 + sum(1 + len(v) for v in vocabulary.values.values())
    starts = zip(vocabulary.starts, NAMES, strict=True)
    parts = [range(start, start + 1 + len(vocabulary.values[name])) for start, name in starts]
    for word in ("Alice", "cat", "Syme", "ran", "東京"):
        assert all(i in part for i, part in zip(vocabulary.ids(word), parts, strict=True))
    lower = NAMES.index("lower")
    assert vocabulary.ids("Syme")[lower] == vocabulary.ids("ran")[lower] == vocabulary.starts[lower]  # not kept
    assert len({vocabulary.ids(w)[lower] for w in ("Alice", "cat", "saw", "the")}) == 4
    assert vocabulary.ids("ALICE")[lower] == vocabulary.ids("Alice")[lower]
    assert FeatureVocabulary(vocabulary.state()).ids("Bob") == vocabulary.ids("Bob")  # what the checkpoint keeps


def test_the_same_words_count_the_same_vocabulary_in_every_process() -> None:
    """No set or hash order decides a row: interpreters with different PYTHONHASHSEEDs count the same rows."""
    code = (
        "from tasks.token_classification.word_features import FeatureVocabulary as V; "
        "v = V.count([['b', 'a', 'c', 'a', 'b', 'c']], ('lower', 'shape'), 1); print(v.state(), v.ids('c'))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env={**env, "PYTHONHASHSEED": seed}, capture_output=True, text=True
        )
        for seed in ("1", "2")
    ]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout


def test_unknown_features_and_a_minimum_under_one_are_config_errors() -> None:
    """A misspelt feature names the known ones; the minimum count must be 1 or more."""
    with pytest.raises(ConfigError, match=r"unknown \['sufix3'\]; known: " + ", ".join(FEATURES)):
        check_features(["lower", "sufix3"], 2)
    with pytest.raises(ConfigError, match="word_feature_min_count 0"):
        check_features(["lower"], 0)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    """A WordPiece tokenizer small enough that longer words split into several pieces."""
    root = tmp_path_factory.mktemp("tok")
    (root / "t.txt").write_text("the cat sat on a mat\nAlice met Bob in Paris\n" * 20)
    return train_tokenizer([root / "t.txt"], "wordpiece", 40, root / "wp")


def test_every_subword_reads_its_words_features_and_specials_none(tokenizer) -> None:
    """All pieces of a word carry that word's rows; [CLS], [SEP] and neighbouring context carry row 0."""
    words = ["Alice", "Bobcats", "in", "Paris"]
    vocabulary = FeatureVocabulary.count([words], NAMES, min_count=1)
    encode = SentenceWindows(tokenizer, 64, 8, False, True, context=4, features=vocabulary)
    out = encode({"tokens": [words], "sentence": [0], "before": [["the", "cat"]], "after": [["sat"]]})
    [ids], [rows] = out["input_ids"], out["word_features"]
    assert len(rows) == len(ids) > len(words) + 2  # a word was split; context was read
    expected = {tuple(vocabulary.ids(w)) for w in words}
    assert {tuple(r) for r in rows} == expected | {(NO_FEATURE,) * len(NAMES)}
    pieces = [tuple(r) for r in rows if tuple(r) == tuple(vocabulary.ids("Bobcats"))]
    assert len(pieces) > 1
    assert rows[0] == rows[-1] == [NO_FEATURE] * len(NAMES)


def test_piece_features_follow_the_pieces_word() -> None:
    """-100 (no word) reads zeros; a word index reads that word's rows."""
    vocabulary = FeatureVocabulary.count([["Ab", "cd"]], ("shape",), 1)
    rows = piece_features(["Ab", "cd"], [IGNORE_INDEX, 0, 0, 1, IGNORE_INDEX], vocabulary)
    assert rows[0] == rows[-1] == [NO_FEATURE]
    assert rows[1] == rows[2] == vocabulary.ids("Ab") != rows[3]


def test_the_tagger_reads_its_features_and_nothing_from_row_zero() -> None:
    """Same ids, other features: other logits; the padding row is zero and gets no gradient."""
    cfg = TransformerConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16, dropout=0.0)
    net = build_token_classifier(cfg, "encoder", 3, crf=True, feature_rows=17).eval()
    assert not net.features.rows.weight[NO_FEATURE].any()
    ids = torch.randint(0, 50, (2, 6))  # (B, T)
    a = torch.randint(1, 17, (2, 6, 2))  # (B, T, K)
    b = a.clone()
    b[:, 3] = NO_FEATURE
    assert not torch.allclose(net(ids, word_features=a)[:, 3], net(ids, word_features=b)[:, 3])
    net(ids, word_features=b).sum().backward()
    assert not net.features.rows.weight.grad[NO_FEATURE].any()
    with pytest.raises(ConfigError, match="backbone encoder"):
        build_token_classifier(cfg.replace(n_decoder_layers=1), "decoder", 3, feature_rows=17)


@pytest.mark.slow
def test_a_checkpoint_with_word_features_is_tested_without_naming_them(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path
) -> None:
    """The features travel in the checkpoint's data spec: `test` from it reads them with no --data option."""
    paths = {"train_path": str(splits["train"]), "val_path": str(splits["val"])}
    run = run_cli("fit", "--trainer.max_steps", "3", word_features=list(NAMES), **paths)
    counted = FeatureVocabulary(json.loads((run / "word_features.json").read_text(encoding="utf-8")))
    assert set(counted.values["lower"]) >= {"anna", "paris", "the"}  # words the fixture's training file repeats
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["state_dict"]["net.features.rows.weight"].shape == (counted.rows, 32)
    out = tmp_path / "e"
    main(
        ["test", "--ckpt_path", str(run / "checkpoints" / "last.ckpt"), "--data.test_path", str(splits["test"])]
        + ["--run.wandb", "disabled", "--trainer.default_root_dir", str(out)]
    )
    assert (out / "eval" / "test-1" / "reports" / "test_entities.csv").is_file()
