"""Character n-gram language models with interpolated Kneser-Ney smoothing: the baseline a GPT is compared with.

python scripts/baselines.py lm --train data/shakespeare/train.txt --val data/shakespeare/val.txt

Each order n (1 to --max_order) is its own model, fitted on the training text and scored on the validation text as
one stream of characters: the mean cross-entropy in nats per character (what a character-level GPT logs as
val/loss) and bits per UTF-8 byte (comparable across tokenizers: a BPE model's summed loss over the same bytes).
The best order is chosen on the validation text itself, so the baseline is as strong as the method gets there.
Counts are plain Python dicts in memory (a 340k-character text at order 8: 5 s, 480 MB), so texts of a few MB.

Smoothing (Chen and Goodman's interpolated Kneser-Ney, one discount per order): the highest order counts n-grams,
each lower order counts the distinct characters that precede it (continuation counts), and every order gives a
discount D = n1 / (n1 + 2 n2) of each seen context's mass to the order below; order 0 is uniform over the training
characters and one slot for a character the training text lacks.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tetraformer.data import DataError
from tetraformer.data.files import resolve_files
from tetraformer.data.tokenizer import training_texts


def read_text(paths: Sequence[Path]) -> str:
    """The text a language-modelling run reads from the same paths (files, directories, globs; .txt line by line,
    .jsonl by its "text" field), one file after another, joined by newlines."""
    files = resolve_files(list(paths))
    return "\n".join("".join(training_texts([file], "text", "utf-8")) for file in files)


@dataclass
class Order:
    """One order's counts: per n-gram, its count; per context, total count, distinct followers and discount."""

    grams: dict[str, int]
    totals: dict[str, int]
    followers: dict[str, int]
    discount: float


def order_from(grams: dict[str, int]) -> Order:
    """An Order from its n-gram counts (raw or continuation), with Ney's discount n1 / (n1 + 2 n2)."""
    totals: dict[str, int] = defaultdict(int)
    followers: dict[str, int] = defaultdict(int)
    for gram, count in grams.items():
        totals[gram[:-1]] += count
        followers[gram[:-1]] += 1
    of_count = Counter(grams.values())
    n1, n2 = of_count.get(1, 0), of_count.get(2, 0)
    discount = n1 / (n1 + 2 * n2) if n1 + n2 else 0.5
    return Order(grams, dict(totals), dict(followers), min(max(discount, 0.05), 0.95))


def raw_counts(text: str, n: int) -> dict[str, int]:
    """How often each n-character string occurs in the text."""
    return dict(Counter(text[i : i + n] for i in range(len(text) - n + 1)))


def continuation_counts(higher: dict[str, int]) -> dict[str, int]:
    """For each (n-1)-gram, the number of distinct characters that precede it (from the n-gram counts)."""
    counts: dict[str, int] = defaultdict(int)
    for gram in higher:
        counts[gram[1:]] += 1
    return dict(counts)


class KneserNey:
    """Interpolated Kneser-Ney over characters, orders 1 to `max_order`, fitted on one text."""

    def __init__(self, text: str, max_order: int) -> None:
        if max_order < 1:
            raise ValueError(f"max_order must be 1 or more, not {max_order}")
        if not text:
            raise ValueError("the training text is empty")
        self.max_order = max_order
        self.vocab = len(set(text)) + 1  # + one slot for a character the training text lacks
        raw = {n: raw_counts(text, n) for n in range(1, max_order + 1)}
        # a model of highest order N counts raw N-grams; each order below N counts continuations
        self.cont = {n: order_from(continuation_counts(raw[n + 1])) for n in range(1, max_order)}
        self.top = {n: order_from(raw[n]) for n in range(1, max_order + 1)}

    def prob(self, context: str, char: str, order: int) -> float:
        """P(char | the last order-1 characters of context) under the model whose highest order is `order`."""
        p = 1.0 / self.vocab
        for n in range(1, order + 1):
            if n - 1 > len(context):
                break
            counts = self.top[n] if n == order else self.cont[n]
            history = context[len(context) - (n - 1) :] if n > 1 else ""
            total = counts.totals.get(history, 0)
            if not total:
                continue  # an unseen context: the order below stands
            seen = max(counts.grams.get(history + char, 0) - counts.discount, 0.0)
            p = (seen + counts.discount * counts.followers[history] * p) / total
        return p

    def nats(self, text: str, order: int) -> float:
        """Total cross-entropy, in nats, of the text read as one stream under the model of highest order `order`."""
        span = order - 1
        return -sum(math.log(self.prob(text[max(0, i - span) : i], char, order)) for i, char in enumerate(text))


def report(model: KneserNey, val: str) -> list[tuple[int, float, float]]:
    """(order, nats per character, bits per UTF-8 byte) of each order on the validation text."""
    size = len(val.encode("utf-8"))
    rows = []
    for order in range(1, model.max_order + 1):
        total = model.nats(val, order)
        rows.append((order, total / len(val), total / (size * math.log(2))))
    return rows


def main(argv: list[str] | None = None) -> None:
    """Fit every order on --train, score each on --val, print a table with the best order marked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, nargs="+", required=True, help="text files or directories of .txt")
    parser.add_argument("--val", type=Path, nargs="+", required=True, help="text files or directories of .txt")
    parser.add_argument("--max_order", type=int, default=8)
    args = parser.parse_args(argv)
    try:
        train, val = read_text(args.train), read_text(args.val)
    except DataError as err:  # a missing, empty or undecodable file, named with its line
        sys.exit(f"error: {err}")
    if not val:
        sys.exit("error: the validation text is empty")
    try:
        model = KneserNey(train, args.max_order)
    except ValueError as err:
        sys.exit(f"error: {err}")
    rows = report(model, val)
    best = min(rows, key=lambda row: row[1])[0]
    lines = [
        f"character n-grams, interpolated Kneser-Ney: {len(train):,} training / {len(val):,} validation characters",
        "| order | nats per character | bits per byte |",
        "|---:|---:|---:|",
    ]
    lines += [f"| {o}{' (best)' if o == best else ''} | {nats:.4f} | {bpb:.4f} |" for o, nats, bpb in rows]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
