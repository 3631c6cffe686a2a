"""Preference pairs made from chat JSONL: each conversation's reply, ended with "!", is chosen over two others.

    python scripts/preference_pairs.py configs/instruction_tuning/chat_tiny.jsonl configs/preference_tuning

For each conversation (its turns before the last reply are the prompt), the reply ended with an exclamation mark
("The opposite of hot is cold!") is chosen over the reply as it is (ended with a full stop: the habit of a model
tuned on the chats) and over its neighbour's reply, also exclaimed (conversations 1 and 2 of the file swap replies, 3
and 4, ...: for the packaged opposites, the same question asked the other way round). These pairs teach a model
tuned on the chats a preference it does not have (the tone) while keeping one it has (the right answer). Every
--every-th conversation's pairs (the 6th, 12th, ...) go to pairs_val.jsonl, the rest to pairs_train.jsonl, so the
held-out pairs ask questions the training pairs never do.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

Message = dict[str, str]


def conversations(path: Path) -> list[list[Message]]:
    """The file's chats as messages (`{prompt, response}` records as a user and an assistant turn)."""
    chats = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        chats.append(
            record.get("messages")
            or [
                {"role": "user", "content": record["prompt"]},
                {"role": "assistant", "content": record["response"]},
            ]
        )
    return chats


def exclaimed(reply: str) -> str:
    """The reply ended with an exclamation mark instead of its full stop."""
    return reply.removesuffix(".") + "!"


def pairs(chats: list[list[Message]]) -> list[list[dict[str, Any]]]:
    """Per conversation, its two pairs (over the reply as it is, over the neighbour's exclaimed reply) as records."""
    out = []
    for i, chat in enumerate(chats):
        prompt, reply = chat[:-1], chat[-1]["content"]
        neighbour = chats[i ^ 1 if (i ^ 1) < len(chats) else i - 1][-1]["content"]
        out.append(
            [{"prompt": prompt, "chosen": exclaimed(reply), "rejected": w} for w in (reply, exclaimed(neighbour))]
        )
    return out


def write(chats: Path, out: Path, every: int = 6) -> dict[str, int]:
    """pairs_train.jsonl and pairs_val.jsonl in `out`; the pairs each holds."""
    made = pairs(conversations(chats))
    splits = {"train": [], "val": []}
    for i, records in enumerate(made, start=1):
        splits["val" if i % every == 0 else "train"].extend(records)
    out.mkdir(parents=True, exist_ok=True)
    for split, records in splits.items():
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        (out / f"pairs_{split}.jsonl").write_text(text, encoding="utf-8")
    return {split: len(records) for split, records in splits.items()}


def main() -> None:
    """Write the pairs of CHATS into OUT."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chats", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--every", type=int, default=6, help="hold out every N-th conversation's pairs")
    args = parser.parse_args()
    counts = write(args.chats, args.out, args.every)
    print(f"{counts['train']} training pairs, {counts['val']} held-out pairs in {args.out}")


if __name__ == "__main__":
    main()
