"""Preference pairs made from chat JSONL: each conversation's answer alone is chosen over two other replies.

    python scripts/preference_pairs.py configs/instruction_tuning/chat_tiny.jsonl configs/preference_tuning

For each conversation (its turns before the last reply are the prompt), the answer alone (the reply's last word,
capitalised: "Cold.") is chosen over the whole reply ("The opposite of hot is cold.", the sentence a model tuned on
the chats learned to say) and over the question's own word alone ("Hot.", a wrong brief answer). A model tuned on the
chats prefers its long replies: these pairs teach a preference it does not have, brief and still right. Every
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


def brief(reply: str) -> str:
    """The reply's last word alone, capitalised, with a full stop: the answer."""
    return reply.rstrip(".").split()[-1].capitalize() + "."


def pairs(chats: list[list[Message]]) -> list[list[dict[str, Any]]]:
    """Per conversation, its two pairs (the answer over the whole reply, and over the question's word) as records."""
    out = []
    for chat in chats:
        prompt, reply = chat[:-1], chat[-1]["content"]
        wrong = [reply, brief(prompt[-1]["content"].rstrip("?"))]
        out.append([{"prompt": prompt, "chosen": brief(reply), "rejected": w} for w in wrong])
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
