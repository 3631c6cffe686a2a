"""Tests for scripts/baselines.py's TF-IDF + LinearSVC baseline on single texts and on sentence pairs."""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

import baselines
import pytest

WORDS = [f"w{i}" for i in range(60)]


def write_pairs(path: Path, n: int, rng: random.Random) -> None:
    """Pairs labelled "same" when both halves name the same key word, else "diff" (each key seen alone is noise)."""
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, ["a", "b", "label"])
        writer.writeheader()
        for _ in range(n):
            x, y = rng.sample(WORDS, 2)
            same = rng.random() < 0.5
            a, b = rng.sample(WORDS, 2)  # one filler word each, shared only by chance
            label = "same" if same else "diff"
            writer.writerow({"a": f"{x} {a}", "b": f"{x if same else y} {b}", "label": label})


def accuracy(capsys: pytest.CaptureFixture[str], argv: list[str]) -> float:
    """Run the baseline and read the accuracy it prints."""
    baselines.main(argv)
    return float(capsys.readouterr().out.split("accuracy ")[1].split()[0])


def test_pair_features_learn_what_the_two_halves_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --pair_field the product features see shared words; a single field cannot, and stays near chance."""
    rng = random.Random()
    write_pairs(tmp_path / "train.csv", 4000, rng)
    write_pairs(tmp_path / "test.csv", 400, rng)
    common = ["--train", str(tmp_path / "train.csv"), "--test", str(tmp_path / "test.csv"), "--text_field", "a"]
    assert accuracy(capsys, [*common, "--pair_field", "b"]) > 0.7  # about 0.84 +- 0.02 over 20 draws
    assert accuracy(capsys, common) < 0.62  # about 0.50 +- 0.03


@pytest.mark.parametrize(("name", "script"), [("ner", "baselines_ner.py"), ("lm", "baselines_lm.py")])
def test_ner_and_lm_run_their_own_script(name: str, script: str) -> None:
    """`baselines.py ner|lm ARGS` is that baseline's script with ARGS, run as a command (no script imports another)."""
    command = baselines.sibling_command([name, "--train", "a"])
    assert command[0] == sys.executable and Path(command[1]).name == script and Path(command[1]).is_file()
    assert command[2:] == ["--train", "a"]
