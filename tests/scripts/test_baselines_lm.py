"""The language-model baseline (scripts/baselines_lm.py): a proper distribution, and learning a known source."""

from __future__ import annotations

import math
import random
from pathlib import Path

import baselines_lm as lm
import pytest

ALPHABET = "abcdefgh"


def markov_text(n: int, rng: random.Random) -> tuple[str, float]:
    """A text from a random order-2 Markov source over ALPHABET, and the source's entropy rate in nats per character.

    Each pair of characters allows three next characters with probabilities 0.6, 0.3, 0.1.
    """
    pairs = [a + b for a in ALPHABET for b in ALPHABET]
    table = {pair: rng.sample(ALPHABET, 3) for pair in pairs}
    weights = (0.6, 0.3, 0.1)
    text = ["a", "b"]
    for _ in range(n - 2):
        text.append(rng.choices(table[text[-2] + text[-1]], weights)[0])
    rate = -sum(w * math.log(w) for w in weights)
    return "".join(text), rate


def test_every_order_is_a_distribution_over_the_characters() -> None:
    """P(. | context) sums to 1 over the training characters and the unseen slot, for seen and unseen contexts."""
    text, _ = markov_text(5_000, random.Random(1))
    model = lm.KneserNey(text, 5)
    for order in range(1, 6):
        for context in (text[100:104], text[2000:2004], "hhhh", "zz", ""):
            total = sum(model.prob(context, c, order) for c in ALPHABET) + model.prob(context, "?", order)
            assert total == pytest.approx(1.0, abs=1e-9), (order, context)


@pytest.mark.parametrize("seed", range(3))
def test_the_right_order_learns_the_source_and_lower_orders_cannot(seed: int) -> None:
    """On text from an order-2 source, order 3 (two characters of context) comes near its entropy rate on held-out
    text; orders 1 and 2 cannot see the context and stay far above it."""
    rng = random.Random(seed)
    text, rate = markov_text(60_000, rng)
    train, val = text[:50_000], text[50_000:]
    rows = {order: nats for order, nats, _ in lm.report(lm.KneserNey(train, 5), val)}
    assert rows[3] < rate + 0.05
    assert rows[2] > rate + 0.3 and rows[1] > rows[2]
    assert rows[5] < rows[2]  # higher orders back off to order 3's counts instead of overfitting


def test_bits_per_byte_counts_utf8_bytes() -> None:
    """A text of 2-byte characters: bits per byte is nats per character / (2 ln 2)."""
    text = "äöü" * 2_000
    (order, nats, bpb), *_ = lm.report(lm.KneserNey(text, 1), "äöüäöü")
    assert order == 1
    assert bpb == pytest.approx(nats / (2 * math.log(2)))


def test_cli_prints_a_table_and_names_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`baselines_lm.py` (`baselines.py lm`) reads files and directories, prints every order with the best marked;
    a missing path or an empty validation text is one error line naming it."""
    text, _ = markov_text(8_000, random.Random(2))
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "a.txt").write_text(text[:6_000], encoding="utf-8")
    (tmp_path / "val.txt").write_text(text[6_000:], encoding="utf-8")
    lm.main(["--train", str(tmp_path / "train"), "--val", str(tmp_path / "val.txt"), "--max_order", "4"])
    out = capsys.readouterr().out
    assert out.count("\n| ") == 5 and out.count("(best)") == 1
    with pytest.raises(SystemExit, match="missing.txt: no such file"):
        lm.main(["--train", str(tmp_path / "missing.txt"), "--val", str(tmp_path / "val.txt")])
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    with pytest.raises(SystemExit, match="empty.txt: file is empty"):
        lm.main(["--train", str(tmp_path / "train"), "--val", str(tmp_path / "empty.txt")])
