"""EntityScore: seqeval's entity scores over an epoch, hand-checked, batch-independent, strict vs lenient."""

from __future__ import annotations

import random

import pytest
import torch
from seqeval.metrics import classification_report, f1_score
from seqeval.scheme import IOB2
from torch import Tensor

from tetraformer.training.metrics.entity import REPORT_COLUMNS, EntityScore

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
ID = {name: i for i, name in enumerate(LABELS)}
# three sentences: 5 true entities, 6 predicted, 4 right (P 4/6, R 4/5, F1 8/11); 10 of 12 words right
TRUE = [
    ["B-PER", "I-PER", "O", "B-LOC"],  # PER [0, 2), LOC [3, 4)
    ["O", "B-ORG", "I-ORG", "I-ORG", "O"],  # ORG [1, 4)
    ["B-LOC", "O", "B-PER"],  # LOC [0, 1), PER [2, 3)
]
PRED = [
    ["B-PER", "O", "O", "B-LOC"],  # PER [0, 1) wrong boundary, LOC right
    ["O", "B-ORG", "I-ORG", "I-ORG", "O"],  # ORG right
    ["B-LOC", "B-ORG", "B-PER"],  # LOC right, ORG spurious, PER right
]


def padded(sentences: list[list[str]], width: int | None = None) -> Tensor:
    """(B, W) ids of tag sentences, -100 after each sentence's end."""
    width = width or max(map(len, sentences))
    out = torch.full((len(sentences), width), -100, dtype=torch.long)
    for row, tags in enumerate(sentences):
        out[row, : len(tags)] = torch.tensor([ID[t] for t in tags])
    return out


def test_entity_f1_is_the_hand_count_not_token_accuracy() -> None:
    """P = 4/6, R = 4/5, F1 = 8/11 from counting spans; token accuracy (10/12) is a different number."""
    scores = {}
    for score in ("precision", "recall", "f1"):
        metric = EntityScore(LABELS, score=score)
        metric.update(padded(PRED), padded(TRUE))
        scores[score] = float(metric.compute())
    assert scores == pytest.approx({"precision": 4 / 6, "recall": 4 / 5, "f1": 8 / 11})
    words = padded(TRUE) != -100
    accuracy = float((padded(PRED) == padded(TRUE))[words].float().mean())
    assert accuracy == pytest.approx(10 / 12) and abs(accuracy - scores["f1"]) > 0.1


def test_report_rows_by_hand_and_as_seqeval() -> None:
    """Per type: PER 1 of 2 both ways, LOC all right, ORG 1 of 2 predicted; then micro and macro rows."""
    metric = EntityScore(LABELS)
    metric.update(padded(PRED), padded(TRUE))
    rows = metric.report_rows()
    assert REPORT_COLUMNS == ["type", "precision", "recall", "f1", "support"]
    assert rows == [
        ["LOC", 1.0, 1.0, 1.0, 2],
        ["ORG", 0.5, 1.0, pytest.approx(2 / 3), 1],
        ["PER", 0.5, 0.5, 0.5, 2],
        ["micro avg", pytest.approx(4 / 6), pytest.approx(4 / 5), pytest.approx(8 / 11), 5],
        ["macro avg", pytest.approx(2 / 3), pytest.approx(2.5 / 3), pytest.approx((1 + 2 / 3 + 0.5) / 3), 5],
    ]
    report = classification_report(TRUE, PRED, output_dict=True)
    for name, *ratios, support in rows:
        expected = [report[name][k] for k in ("precision", "recall", "f1-score", "support")]
        assert [*ratios, support] == pytest.approx(expected)


def random_sentences(seed: int, n: int) -> tuple[list[list[str]], list[list[str]]]:
    """n random (true, predicted) tag sentences of 1..9 words, scheme-breaking ones included."""
    rng = random.Random(seed)
    true, pred = [], []
    for _ in range(n):
        length = rng.randint(1, 9)
        true.append([rng.choice(LABELS) for _ in range(length)])
        pred.append([t if rng.random() < 0.7 else rng.choice(LABELS) for t in true[-1]])
    return true, pred


@pytest.mark.parametrize("strict", [False, True])
def test_batches_of_any_size_equal_one_update_and_seqeval(strict: bool) -> None:
    """Uneven batches with extra padding give the value of one update with everything, which is seqeval's."""
    true, pred = random_sentences(1, 40)
    whole = EntityScore(LABELS, strict=strict)
    whole.update(padded(pred), padded(true))
    batched = EntityScore(LABELS, strict=strict)
    start = 0
    for size, extra in ((7, 0), (1, 3), (13, 1), (19, 5)):
        batch = slice(start, start + size)
        width = max(map(len, true[batch])) + extra
        batched.update(padded(pred[batch], width), padded(true[batch], width))
        start += size
    mode = {"mode": "strict", "scheme": IOB2} if strict else {}
    expected = f1_score(true, pred, zero_division=0, **mode)
    assert float(batched.compute()) == pytest.approx(float(whole.compute())) == pytest.approx(expected)
    assert batched.report_rows() == whole.report_rows()


def test_strict_mode_drops_entities_that_break_the_scheme() -> None:
    """An I-PER after O is an entity in the default (conlleval) mode and none in IOB2's strict mode."""
    true, pred = padded([["B-PER", "I-PER", "O"]]), padded([["I-PER", "I-PER", "O"]])
    scores = []
    for strict in (False, True):
        metric = EntityScore(LABELS, strict=strict)
        metric.update(pred, true)
        scores.append(float(metric.compute()))
    assert scores == [1.0, 0.0]


def test_scores_are_read_from_word_positions_only() -> None:
    """Predictions where the target is -100 are ignored; (B, W, L) scores are read by argmax."""
    true = padded([["B-PER", "O"]], width=4)
    pred = torch.tensor([[ID["B-PER"], ID["O"], ID["B-LOC"], ID["I-LOC"]]])
    metric = EntityScore(LABELS)
    metric.update(torch.nn.functional.one_hot(pred, len(LABELS)).float(), true)
    assert float(metric.compute()) == 1.0


def test_bio_es_strict_and_io() -> None:
    """BIOES strict uses seqeval's IOBES; IO (no strict scheme in seqeval) scores runs of one type."""
    bioes = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    metric = EntityScore(bioes, scheme="BIOES", strict=True)
    ids = {name: i for i, name in enumerate(bioes)}
    true = torch.tensor([[ids["B-PER"], ids["E-PER"], ids["S-PER"]]])
    metric.update(torch.tensor([[ids["B-PER"], ids["I-PER"], ids["S-PER"]]]), true)  # B I: unfinished
    assert float(metric.compute()) == pytest.approx(2 * 1 / (1 + 2))  # 1 right of 1 predicted, 2 true
    io = EntityScore(["O", "I-PER", "I-LOC"], scheme="IO", strict=True)
    io.update(torch.tensor([[1, 1, 2, 0]]), torch.tensor([[1, 1, 2, 2]]))
    assert float(io.compute()) == pytest.approx(0.5)  # PER right; LOC [2, 3) is not LOC [2, 4)


def test_bad_settings_are_errors() -> None:
    """Unknown scheme or score, labels outside the scheme, ids outside the labels: ValueErrors."""
    with pytest.raises(ValueError, match="unknown tag scheme"):
        EntityScore(LABELS, scheme="BIO")
    with pytest.raises(ValueError, match="unknown score 'accuracy'"):
        EntityScore(LABELS, score="accuracy")
    with pytest.raises(ValueError, match="'S-PER' is not an IOB2 tag"):
        EntityScore(["O", "S-PER"])
    with pytest.raises(ValueError, match="outside 0..6"):
        EntityScore(LABELS).update(torch.tensor([[7]]), torch.tensor([[0]]))


def test_no_data_and_no_entities_give_zeros() -> None:
    """Before any sentence, or with no entity anywhere, scores and report averages are 0."""
    metric = EntityScore(LABELS)
    assert metric.report_rows() == [["micro avg", 0.0, 0.0, 0.0, 0], ["macro avg", 0.0, 0.0, 0.0, 0]]
    metric.update(padded([["O", "O"]]), padded([["O", "O"]]))
    assert float(metric.compute()) == 0.0 and [r[0] for r in metric.report_rows()] == ["micro avg", "macro avg"]
