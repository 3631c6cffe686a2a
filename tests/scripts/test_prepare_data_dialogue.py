"""Tests for the Friends reply-pair builder (scripts/prepare_data_dialogue.py) on a handmade transcript table."""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import prepare_data_dialogue as dialogue  # noqa: E402


def transcript(episodes: int, lines: int) -> str:
    """An Orange .tab table of `episodes` episodes with `lines` numbered quotes each."""
    header = "Season & Episode\tAuthor\tQuote\nd\td\tstring\n\t\tinclude=True\n"
    rows = [f"{e:04d}\tJoey\t  ep{e}  line{i} " for e in range(episodes) for i in range(lines)]
    return header + "\n".join(rows) + "\n"


def test_reply_pairs_are_next_lines_and_others_come_from_other_episodes() -> None:
    """Each anchor gets its next line as a reply and a line of another episode as the other; halves balance."""
    episodes = [[f"ep{e} line{i}" for i in range(12)] for e in range(4)]
    pairs = dialogue.reply_pairs(episodes, random.Random(0))
    replies = [p for p in pairs if p["label"] == "reply"]
    others = [p for p in pairs if p["label"] == "other"]
    assert len(replies) == len(others) == 4 * 11
    for pair in replies:
        episode, line = pair["context"].split()
        assert pair["reply"] == f"{episode} line{int(line[4:]) + 1}"
    for pair in others:
        assert pair["reply"].split()[0] != pair["context"].split()[0]


def test_episode_lines_groups_quotes_in_order_and_squeezes_spaces() -> None:
    """Quotes are grouped by episode in transcript order, whitespace-normalised, empty ones dropped."""
    rows = [
        {"Season & Episode": "0101", "Quote": " Hi  there "},
        {"Season & Episode": "0102", "Quote": "Other"},
        {"Season & Episode": "0101", "Quote": "  "},
        {"Season & Episode": "0101", "Quote": "Bye"},
    ]
    assert dialogue.episode_lines(rows) == [["Hi there", "Bye"], ["Other"]]


def test_builder_splits_by_episode_and_caps_training_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No episode's lines reach two splits; the training cap holds; every label is reply or other."""
    package = tmp_path / "pkg"
    (package / "datasets").mkdir(parents=True)
    (package / "datasets" / "friends-transcripts.tab").write_text(transcript(20, 25), encoding="utf-8")
    monkeypatch.setattr(dialogue, "pip_package_dir", lambda dist, module: package)
    counts = dialogue.build_friends_replies(tmp_path / "out", seed=3, train_cap=100)
    assert counts["friends_replies/train.csv"] == 100
    episodes = {}
    for split in ("train", "val", "test"):
        with (tmp_path / "out" / "friends_replies" / f"{split}.csv").open(encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        assert {r["label"] for r in rows} == {"reply", "other"}
        episodes[split] = {r["context"].split()[0] for r in rows} | {r["reply"].split()[0] for r in rows}
    assert not episodes["train"] & episodes["val"] and not episodes["train"] & episodes["test"]
    assert not episodes["val"] & episodes["test"]
