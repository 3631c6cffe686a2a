"""scripts/preference_pairs.py: the packaged pairs are what it makes of the packaged chats; no held-out question is
trained on."""

from __future__ import annotations

import json
from pathlib import Path

from preference_pairs import write

ROOT = Path(__file__).resolve().parents[2]
CHATS = ROOT / "configs" / "instruction_tuning" / "chat_tiny.jsonl"
PAIRS = ROOT / "configs" / "preference_tuning"


def test_the_packaged_pairs_are_remade_and_held_out_by_question(tmp_path: Path) -> None:
    """Written again from chat_tiny.jsonl, both files are byte for byte the packaged ones; the held-out pairs' prompts
    appear in no training pair; each conversation's exclaimed reply is chosen over the reply as it is."""
    assert write(CHATS, tmp_path) == {"train": 60, "val": 12}
    for split in ("train", "val"):
        name = f"pairs_{split}.jsonl"
        assert (tmp_path / name).read_bytes() == (PAIRS / name).read_bytes(), name
    train, val = ([json.loads(line) for line in (PAIRS / f"pairs_{s}.jsonl").open()] for s in ("train", "val"))
    assert not {json.dumps(p["prompt"]) for p in val} & {json.dumps(p["prompt"]) for p in train}
    assert (train[0]["chosen"], train[0]["rejected"]) == (
        "The opposite of hot is cold!",
        "The opposite of hot is cold.",
    )
