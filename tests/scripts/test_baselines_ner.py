"""The NER baselines (scripts/baselines_common.py's taggers, scripts/baselines_ner.py): features, the task's entity
metric, and learning on a fixture."""

from __future__ import annotations

import random
import string
from pathlib import Path

import baselines_common as ner
import baselines_ner
import pytest
from seqeval.metrics import f1_score

FILLER = ["we", "saw", "the", "man", "and", "a", "dog", "in", "town", "today", "with", "her", "then", "left"]
TITLES = ["Mr", "Mrs", "Dr"]


def fresh_name(rng: random.Random) -> str:
    """A capitalised nonsense word: names of held-out sentences are unseen in training."""
    return rng.choice(string.ascii_uppercase) + "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 7)))


def titled_sentences(n: int, rng: random.Random) -> list[tuple[list[str], list[str]]]:
    """Filler words with one PER: a fresh capitalised name after a title (the title itself is O)."""
    sentences = []
    for _ in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randint(3, 8))]
        tags = ["O"] * len(words)
        at = rng.randint(0, len(words))
        words[at:at] = [rng.choice(TITLES), fresh_name(rng)]
        tags[at:at] = ["O", "B-PER"]
        sentences.append((words, tags))
    return sentences


def majority_f1(train: list[tuple[list[str], list[str]]], test: list[tuple[list[str], list[str]]]) -> float:
    """Entity F1 of tagging every word with the training data's most frequent tag."""
    tags = [t for _, ts in train for t in ts]
    majority = max(set(tags), key=tags.count)
    return ner.entity_scores([t for _, t in test], [[majority] * len(w) for w, _ in test])[-2][3]


def test_shape_collapses_character_classes() -> None:
    """Upper -> X, lower -> x, digit -> d, runs collapsed, punctuation kept."""
    assert [ner.shape(w) for w in ("McDonald", "1987", "U.S.", "word")] == ["XxXx", "d", "X.X.", "x"]


def test_features_see_neighbours_and_sentence_edges() -> None:
    """A word's row holds its neighbours at -2..+2 where they exist, and BOS / EOS at the edges."""
    rows = ner.sentence_features(["Anna", "met", "Boris"])
    assert rows[0]["BOS"] and not rows[0]["EOS"] and rows[2]["EOS"]
    assert rows[0]["+1:lower"] == "met" and rows[0]["+2:lower"] == "boris" and "-1:lower" not in rows[0]
    assert rows[1]["title"] is False and rows[2]["title"] is True and rows[2]["suf3"] == "ris"


def test_entity_scores_agree_with_seqeval() -> None:
    """The task's metric (EntityScore) scores the baseline's tags as seqeval's default mode does."""
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-LOC"], ["B-PER"]]
    guess = [["B-PER", "O", "O", "B-LOC"], ["O", "B-LOC"], ["I-PER"]]
    micro = ner.entity_scores(true, guess)[-2]
    assert micro[0] == "micro avg" and micro[3] == pytest.approx(f1_score(true, guess))


@pytest.mark.parametrize("model", ["perceptron", "crf"])
def test_baseline_tags_unseen_names_from_context(model: str) -> None:
    """Trained on titled names, a tagger finds unseen names in held-out sentences; all-O scores 0."""
    if model == "crf":
        pytest.importorskip("sklearn_crfsuite")
    rng = random.Random()
    train, test = titled_sentences(300, rng), titled_sentences(100, rng)
    _, rows = ner.score(ner.fit_tagger(train, model), test)
    assert rows[-2][3] > majority_f1(train, test) + 0.5


def test_cli_reads_conll_and_prints_the_entity_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`baselines_ner.py --model perceptron` (`baselines.py ner`) reads CoNLL files and prints the per-type table
    and the micro F1."""
    rng = random.Random()
    for name, n in (("train", 200), ("test", 40)):
        lines = "".join(
            "".join(f"{w} {t}\n" for w, t in zip(ws, ts, strict=True)) + "\n" for ws, ts in titled_sentences(n, rng)
        )
        (tmp_path / f"{name}.conll").write_text(lines, encoding="utf-8")
    baselines_ner.main(
        [
            "--model",
            "perceptron",
            "--train",
            str(tmp_path / "train.conll"),
            "--test",
            str(tmp_path / "test.conll"),
        ]
    )
    out = capsys.readouterr().out
    assert "| PER |" in out and "test entity F1 (micro)" in out


@pytest.mark.parametrize("split", ["train", "test"])
def test_cli_names_a_tag_outside_the_scheme(split: str, tmp_path: Path) -> None:
    """A tag the scheme does not have ends the command with one line naming the file and line, in either file."""
    good = "anna B-PER\nsmith I-PER\nwent O\n\n"
    for name in ("train", "test"):
        text = good + ("bob B-PER\nrome L-LOC\n\n" if name == split else "")
        (tmp_path / f"{name}.conll").write_text(text, encoding="utf-8")
    paths = ["--train", str(tmp_path / "train.conll"), "--test", str(tmp_path / "test.conll")]
    with pytest.raises(SystemExit, match=rf"error: .*{split}\.conll:6: 'L-LOC' is not an IOB2 tag"):
        baselines_ner.main(["--model", "perceptron", *paths])
