"""The datamodule: tag vocabulary from the scheme, IOB1 read as IOB2, and bad tags as one-line CLI errors."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tasks.token_classification.data import TokenClassificationData, scheme_tags
from tests.tasks.token_classification.conftest import tagged_sentences
from tetraformer.cli import main
from tetraformer.data import DataError, train_tokenizer
from tetraformer.data.collate import IGNORE_INDEX


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    """A WordPiece tokenizer of the fixture's words."""
    text = tmp_path / "words.txt"
    text.write_text("".join(" ".join(w for w, _ in s) + "\n" for s in tagged_sentences(50, 9)), encoding="utf-8")
    train_tokenizer([text], "wordpiece", 100, tmp_path / "tok")
    return tmp_path / "tok"


def test_iob1_is_read_as_iob2_with_a_scheme_complete_vocabulary(tmp_path: Path, tokenizer_dir: Path) -> None:
    """IOB1 tags become IOB2; the vocabulary is O then B-/I- of every type seen (I-LOC too, never seen)."""
    train = tmp_path / "train.conll"
    train.write_text("anna I-PER\nsmith I-PER\nboris B-PER\nin O\noslo I-LOC\n\n", encoding="utf-8")
    data = TokenClassificationData(
        train_path=str(train), val_path=str(train), tag_scheme="IOB1", tokenizer=str(tokenizer_dir)
    )
    data.setup("fit")
    assert data.sentences["train"][0]["tags"] == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert data.vocabulary.names == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert data.scheme == "IOB2"
    labels = [label for label in data.datasets["train"][0]["labels"] if label != IGNORE_INDEX]
    assert labels == [3, 4, 3, 0, 1]


def test_bioes_vocabulary_and_all_subwords_labelled(tmp_path: Path, tokenizer_dir: Path) -> None:
    """BIOES adds E- and S- tags; label_all_subwords labels every subword of a word with its tag."""
    train = tmp_path / "train.conll"
    train.write_text("anna B-PER\nsmithereens E-PER\nin O\noslo S-LOC\n\n", encoding="utf-8")
    data = TokenClassificationData(
        train_path=str(train),
        val_path=str(train),
        tag_scheme="BIOES",
        tokenizer=str(tokenizer_dir),
        label_all_subwords=True,
    )
    data.setup("fit")
    assert data.vocabulary.names == ["O", *(f"{p}-{t}" for t in ("LOC", "PER") for p in "BIES")]
    row = data.datasets["train"][0]
    assert sum(label != IGNORE_INDEX for label in row["labels"]) == len(row["input_ids"]) - 2  # all but specials
    assert sum(w != IGNORE_INDEX for w in row["word_index"]) == 4


def test_later_subwords_of_a_b_word_carry_its_i_tag(tmp_path: Path, tokenizer_dir: Path) -> None:
    """Under label_all_subwords a B-X word's later subwords are I-X (Hugging Face's `label_all_tokens`), so the
    labels start the entity once; its first subword and the other words keep their own tags."""
    train = tmp_path / "train.conll"
    train.write_text("smithereens B-PER\nsmithereens I-PER\nin O\n\n", encoding="utf-8")
    data = TokenClassificationData(
        train_path=str(train), val_path=str(train), tokenizer=str(tokenizer_dir), label_all_subwords=True
    )
    data.setup("fit")
    row, names = data.datasets["train"][0], data.vocabulary.names
    tags = [names[label] for label in row["labels"] if label != IGNORE_INDEX]
    first = [names[label] for label, w in zip(row["labels"], row["word_index"], strict=True) if w != IGNORE_INDEX]
    assert first == ["B-PER", "I-PER", "O"]
    assert len(tags) > 3 and tags[0] == "B-PER" and tags.count("B-PER") == 1  # "smithereens" is several pieces
    assert tags[: tags.index("O")] == ["B-PER"] + ["I-PER"] * (tags.index("O") - 1)


def test_training_data_without_entities_is_an_error() -> None:
    """Only O tags: no entity type to learn."""
    with pytest.raises(DataError, match="no entity tags"):
        scheme_tags([], "IOB2")


@pytest.mark.parametrize(
    ("val_text", "expected"),
    [
        ("anna B-PER\nin O\nrome B-CITY\n\n", r"val\.conll:3: unknown label 'B-CITY'; known labels: 'O', 'B-LOC'"),
        ("anna B-PER\nrome L-LOC\n", r"val\.conll:2: 'L-LOC' is not an IOB2 tag"),
        ("anna\tNNP\tB-PER\nrome\n", r"val\.conll:2: line has one column 'rome'"),
    ],
)
def test_bad_validation_tags_are_one_line_errors(
    run_cli: Callable[..., Path],
    splits: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    val_text: str,
    expected: str,
) -> None:
    """Through the CLI: exit code 2 and one line naming file, line, the problem (and the known tags)."""
    val = tmp_path / "val.conll"
    val.write_text(val_text, encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", "--trainer.max_steps", "1", train_path=str(splits["train"]), val_path=str(val))
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: ")
    assert re.search(expected, line), line


def test_vocab_paths_words_get_pieces_of_their_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A word only `vocab_paths` holds is one piece of the run's tokenizer; without it, it is split. Its tags
    are not read (a tag the training data lacks is fine)."""
    monkeypatch.chdir(tmp_path)  # no trainer: the run directory is the working directory
    train = tmp_path / "train.conll"
    train.write_text("".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in tagged_sentences(40, 0)))
    unlabelled = tmp_path / "more.conll"
    unlabelled.write_text("zanzibar\tB-ZZZ\nquixotic\tO\n\n" * 3, encoding="utf-8")
    for paths, whole in (([], False), ([str(unlabelled)], True)):
        data = TokenClassificationData(
            train_path=str(train), vocab_size=400, vocab_cap=False, vocab_paths=paths, cache_dir=str(tmp_path / "cache")
        )
        data.prepare_data()
        assert (data.load_run_tokenizer().tokenize("zanzibar") == ["zanzibar"]) == whole, paths


def test_vocab_paths_beside_a_given_tokenizer_are_unused_with_a_warning(
    tmp_path: Path, tokenizer_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Beside --data.tokenizer there is no run tokenizer to train: fitting says vocab_paths goes unused, once."""
    train = tmp_path / "train.conll"
    train.write_text("".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in tagged_sentences(20, 0)))
    data = TokenClassificationData(
        train_path=str(train), vocab_paths=[str(train)], tokenizer=str(tokenizer_dir), cache_dir=str(tmp_path / "c")
    )
    with caplog.at_level("WARNING"):
        data.prepare_data()  # no Trainer: what `tetraformer prepare` does before a fit
    assert [r.getMessage() for r in caplog.records if "vocab_paths is not used" in r.getMessage()], caplog.text


def test_a_checkpoint_fitted_with_vocab_paths_is_tested_and_predicted(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path
) -> None:
    """`test` and `predict` hand the checkpoint's tokenizer to data options that hold vocab_paths: they run."""
    paths = {"train_path": str(splits["train"]), "val_path": str(splits["val"])}
    run = run_cli("fit", "--trainer.max_steps", "2", vocab_paths=[str(splits["test"])], **paths)
    ckpt = str(run / "checkpoints" / "last.ckpt")
    common = ["--ckpt_path", ckpt, "--run.wandb", "disabled", "--trainer.default_root_dir", str(tmp_path / "e")]
    main(["test", "--data.test_path", str(splits["test"]), *common])
    main(["predict", "--data.predict_path", str(splits["test"]), *common])
    written = tmp_path / "e" / "eval" / "predict-1" / "predictions.jsonl"
    assert len(written.read_text(encoding="utf-8").splitlines()) == 60
    assert (tmp_path / "e" / "eval" / "test-1" / "reports" / "test_entities.csv").is_file()


def test_two_fits_of_one_seed_train_the_same_tokenizer_and_weights(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path
) -> None:
    """Each fit trains its own WordPiece tokenizer on the training words; one seed gives one run, to the bit."""
    paths = {"train_path": str(splits["train"]), "val_path": str(splits["val"])}
    runs = [run_cli("fit", "--trainer.max_steps", "4", root=tmp_path / name, **paths) for name in ("a", "b")]
    tokenizers = [(run / "tokenizer" / "tokenizer.json").read_bytes() for run in runs]
    assert tokenizers[0] == tokenizers[1]
    weights = [torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"] for run in runs]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
