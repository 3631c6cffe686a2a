"""Hashed word features: stable rows, one table per feature, every subword reads its word's, carried by checkpoints."""

from __future__ import annotations

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
    check_features,
    feature_ids,
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


def test_each_feature_hashes_into_its_own_table() -> None:
    """Feature k of any word lands in rows [1 + k * buckets, 1 + (k + 1) * buckets); row 0 is never used."""
    buckets = 16
    for word in ("Alice", "alice", "Syme", "東京", "x"):
        ids = feature_ids(word, NAMES, buckets)
        assert all(1 + k * buckets <= i < 1 + (k + 1) * buckets for k, i in enumerate(ids))
    lower = NAMES.index("lower")
    assert feature_ids("Alice", NAMES, 1 << 20)[lower] == feature_ids("ALICE", NAMES, 1 << 20)[lower]
    assert feature_ids("Alice", NAMES, 1 << 20) != feature_ids("Alicia", NAMES, 1 << 20)


def test_feature_rows_are_the_same_in_every_process() -> None:
    """No per-process hash seed: two interpreters with different PYTHONHASHSEEDs give the same rows."""
    code = (
        "from tasks.token_classification.word_features import feature_ids as f; print(f('Syme', ('lower', 'shape'), 9))"
    )
    rows = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        rows.append(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True))
    assert rows[0].stdout == rows[1].stdout == f"{feature_ids('Syme', ('lower', 'shape'), 9)}\n"


def test_unknown_features_and_empty_tables_are_config_errors() -> None:
    """A misspelt feature names the known ones; buckets must be positive."""
    with pytest.raises(ConfigError, match="unknown \\['sufix3'\\]; known: " + ", ".join(FEATURES)):
        check_features(["lower", "sufix3"], 16)
    with pytest.raises(ConfigError, match="word_feature_buckets 0"):
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
    encode = SentenceWindows(tokenizer, 64, 8, False, True, context=4, features=NAMES, buckets=32)
    out = encode({"tokens": [words], "sentence": [0], "before": [["the", "cat"]], "after": [["sat"]]})
    [ids], [rows] = out["input_ids"], out["word_features"]
    assert len(rows) == len(ids) > len(words) + 2  # a word was split; context was read
    expected = {tuple(feature_ids(w, NAMES, 32)) for w in words}
    assert {tuple(r) for r in rows} == expected | {(NO_FEATURE,) * len(NAMES)}
    pieces = [tuple(r) for r in rows if tuple(r) == tuple(feature_ids("Bobcats", NAMES, 32))]
    assert len(pieces) > 1
    assert rows[0] == rows[-1] == [NO_FEATURE] * len(NAMES)


def test_piece_features_follow_the_pieces_word() -> None:
    """-100 (no word) reads zeros; a word index reads that word's rows."""
    rows = piece_features(["Ab", "cd"], [IGNORE_INDEX, 0, 0, 1, IGNORE_INDEX], ("shape",), 8)
    assert rows[0] == rows[-1] == [NO_FEATURE]
    assert rows[1] == rows[2] == feature_ids("Ab", ("shape",), 8) != rows[3]


def test_the_tagger_reads_its_features_and_nothing_from_row_zero() -> None:
    """Same ids, other features: other logits; the padding row is zero and gets no gradient."""
    cfg = TransformerConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16, dropout=0.0)
    net = build_token_classifier(cfg, "encoder", 3, crf=True, features=(2, 8)).eval()
    assert not net.features.rows.weight[NO_FEATURE].any()
    ids = torch.randint(0, 50, (2, 6))  # (B, T)
    a = torch.randint(1, 17, (2, 6, 2))  # (B, T, K)
    b = a.clone()
    b[:, 3] = NO_FEATURE
    assert not torch.allclose(net(ids, word_features=a)[:, 3], net(ids, word_features=b)[:, 3])
    net(ids, word_features=b).sum().backward()
    assert not net.features.rows.weight.grad[NO_FEATURE].any()
    with pytest.raises(ConfigError, match="backbone encoder"):
        build_token_classifier(cfg.replace(n_decoder_layers=1), "decoder", 3, features=(2, 8))


@pytest.mark.slow
def test_a_checkpoint_with_word_features_is_tested_without_naming_them(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path
) -> None:
    """The features travel in the checkpoint's data spec: `test` from it reads them with no --data option."""
    paths = {"train_path": str(splits["train"]), "val_path": str(splits["val"])}
    run = run_cli("fit", "--trainer.max_steps", "3", word_features=list(NAMES), word_feature_buckets=64, **paths)
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["state_dict"]["net.features.rows.weight"].shape == (1 + len(NAMES) * 64, 32)
    out = tmp_path / "e"
    main(
        ["test", "--ckpt_path", str(run / "checkpoints" / "last.ckpt"), "--data.test_path", str(splits["test"])]
        + ["--run.wandb", "disabled", "--trainer.default_root_dir", str(out)]
    )
    assert (out / "eval" / "test-1" / "reports" / "test_entities.csv").is_file()
