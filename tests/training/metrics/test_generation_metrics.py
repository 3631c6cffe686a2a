"""BLEU / chrF equal sacreBLEU's corpus scores whatever the batches; ROUGE equals hand-computed values."""

from __future__ import annotations

import pytest
import sacrebleu
import torch

from tetraformer.training.metrics.generation import (
    CorpusBLEU,
    CorpusChrF,
    RougeScore,
    generation_metrics,
)

REFERENCES = [
    "The cat sat on the mat.",
    "There is a house in New Orleans.",
    "Das Mädchen läuft schnell über die Straße.",
    "A perfect match, word for word.",
    "Nobody said anything.",
    "Grüße aus Köln: Bier, Dom & Karneval!",
]
HYPOTHESES = [
    "The cat is on the mat.",
    "There's a house in new Orleans",
    "Das Mädchen rennt schnell über die Strasse.",
    "A perfect match, word for word.",
    "",
    "Grüße aus Köln: Dom und Karneval!",
]


def batches(items: list[str], sizes: list[int]) -> list[list[str]]:
    """`items` cut into consecutive batches of `sizes`."""
    starts = torch.tensor([0, *sizes]).cumsum(0).tolist()
    return [items[a:b] for a, b in zip(starts[:-1], starts[1:], strict=True)]


SIZES = [1, 3, 2]  # uneven batches of the six sentences


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (CorpusBLEU, sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score),
        (lambda: CorpusBLEU(tokenize="intl"), sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES], tokenize="intl").score),
        (lambda: CorpusBLEU(lowercase=True), sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES], lowercase=True).score),
        (CorpusChrF, sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score),
        (lambda: CorpusChrF(word_order=2), sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES], word_order=2).score),
    ],
)
def test_corpus_scores_equal_sacrebleu_over_uneven_batches(make, expected: float) -> None:
    """Batches of 1, 3 and 2 sentences give sacreBLEU's corpus score of all six sentences."""
    metric = make()
    for hyps, refs in zip(batches(HYPOTHESES, SIZES), batches(REFERENCES, SIZES), strict=True):
        metric.update(hyps, refs)
    assert 0.0 < expected < 100.0
    assert metric.compute().item() == pytest.approx(expected, abs=1e-4)


def test_corpus_bleu_smooths_an_order_without_matches_as_sacrebleu_does() -> None:
    """No 4-gram matches: sacreBLEU's "exp" smoothing gives a positive score, and so does CorpusBLEU."""
    hyps, refs = ["a b c d e f", "the cat"], ["a b c x e f", "the cat sat"]
    expected = sacrebleu.corpus_bleu(hyps, [refs]).score
    metric = CorpusBLEU()
    metric.update(hyps, refs)
    assert expected > 10.0
    assert metric.compute().item() == pytest.approx(expected, abs=1e-4)


def test_corpus_bleu_is_not_a_mean_of_batch_scores() -> None:
    """The fixture tells a corpus score from the mean of per-batch scores, so the test above can fail."""
    per_batch = [
        sacrebleu.corpus_bleu(h, [r]).score
        for h, r in zip(batches(HYPOTHESES, SIZES), batches(REFERENCES, SIZES), strict=True)
    ]
    corpus = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    assert abs(sum(per_batch) / len(per_batch) - corpus) > 1.0


@pytest.mark.parametrize("metric_type", [CorpusBLEU, CorpusChrF])
def test_batches_equal_one_update_and_reset_forgets(metric_type) -> None:
    """Sentence by sentence equals all at once; after reset only new sentences count."""
    whole, split = metric_type(), metric_type()
    whole.update(HYPOTHESES, REFERENCES)
    for hyp, ref in zip(HYPOTHESES, REFERENCES, strict=True):
        split.update([hyp], [ref])
    split.update([], [])
    assert split.compute().item() == whole.compute().item()
    whole.reset()
    whole.update(REFERENCES[:2], REFERENCES[:2])
    assert whole.compute().item() == pytest.approx(100.0)


def test_perfect_and_empty_hypotheses() -> None:
    """Hypotheses equal to their references score 100; empty ones score 0 like sacreBLEU."""
    for metric_type in (CorpusBLEU, CorpusChrF):
        perfect, empty = metric_type(), metric_type()
        perfect.update(REFERENCES, REFERENCES)
        empty.update([""] * len(REFERENCES), REFERENCES)
        assert perfect.compute().item() == pytest.approx(100.0)
        assert empty.compute().item() == 0.0
    assert sacrebleu.corpus_bleu([""] * len(REFERENCES), [REFERENCES]).score == 0.0


def test_rouge_equals_hand_computed_f_measures() -> None:
    """Per-sentence F-measures by hand, averaged over sentences, on the 0-100 scale."""
    hyps = ["the cat sat on the mat", "Hello, World!", ""]
    refs = ["the cat sat on a mat", "hello world again", "anything"]
    # sentence 1: 6 words each; unigram hits the,cat,sat,on,mat = 5; bigram hits the-cat,cat-sat,sat-on = 3 of 5;
    # LCS "the cat sat on mat" = 5. Sentence 2: "hello world" vs "hello world again": 2 hits of 2 / 3 words,
    # F1 = 2 * 1 * 2/3 / (1 + 2/3) = 0.8; one bigram hit of 1 / 2, F1 = 2/3; LCS 2 -> 0.8. Sentence 3 scores 0.
    expected = {
        "rouge1": (5 / 6 + 0.8 + 0) / 3,
        "rouge2": (3 / 5 + 2 / 3 + 0) / 3,
        "rougeL": (5 / 6 + 0.8 + 0) / 3,
    }
    for key, value in expected.items():
        metric = RougeScore(key)
        metric.update(hyps[:1], refs[:1])
        metric.update(hyps[1:], refs[1:])
        assert metric.compute().item() == pytest.approx(100 * value, abs=1e-4)


def test_rouge_rejects_unknown_key() -> None:
    with pytest.raises(ValueError, match="unknown ROUGE key 'rougeLsum'; expected one of rouge1, rouge2, rougeL"):
        RougeScore("rougeLsum")  # type: ignore[arg-type]


def test_generation_metrics_builds_fresh_metrics_by_name() -> None:
    """Each name gets its own metric; bleu_tokenize reaches BLEU; unknown names are listed."""
    metrics = generation_metrics(["bleu", "chrf", "rouge1", "rouge2", "rougeL"], bleu_tokenize="char")
    assert [type(m) for m in metrics.values()] == [CorpusBLEU, CorpusChrF, RougeScore, RougeScore, RougeScore]
    assert [m.key for m in list(metrics.values())[2:]] == ["rouge1", "rouge2", "rougeL"]
    metrics["bleu"].update(HYPOTHESES, REFERENCES)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES], tokenize="char").score
    assert metrics["bleu"].compute().item() == pytest.approx(expected, abs=1e-4)
    assert generation_metrics(["bleu"])["bleu"] is not generation_metrics(["bleu"])["bleu"]
    with pytest.raises(ValueError, match=r"unknown generation metric\(s\) 'meteor'; expected any of bleu, chrf"):
        generation_metrics(["bleu", "meteor"])


def test_mismatched_inputs_are_errors() -> None:
    metric = CorpusBLEU()
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        metric.update(["a", "b"], ["a"])
    with pytest.raises(TypeError, match="lists of strings, not one string"):
        metric.update("a cat", "a cat")
