"""Generation metrics over an epoch: sacreBLEU's BLEU and chrF, and ROUGE-1/2/L, as DDP-safe torchmetrics.

Strings cannot be all-gathered, so each metric keeps sum-reduced tensor states. Corpus BLEU and chrF are functions of
summed per-sentence statistics (n-gram matches and totals per order, lengths): the epoch's score equals
`sacrebleu.corpus_bleu` / `corpus_chrf` on all of its sentences, whatever the batches and processes. ROUGE is
a mean over sentences, so it keeps the sum of the sentence F-measures and their count.

Every score is on sacreBLEU's 0-100 scale (ROUGE too), so generation metrics read alike in one log.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from sacrebleu.metrics import BLEU, CHRF
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.functional.text.rouge import rouge_score
from torchmetrics.text import SacreBLEUScore

RougeKey = Literal["rouge1", "rouge2", "rougeL"]


class CorpusBLEU(SacreBLEUScore):
    """sacreBLEU corpus BLEU (0-100): torchmetrics' SacreBLEUScore counts, sacreBLEU's `compute_bleu` scores.

    `tokenize` is sacreBLEU's tokenizer name ("13a", "intl", "char", ...). SacreBLEUScore's own compute returns
    0 whenever one n-gram order has no match, where sacreBLEU smooths that order ("exp"): an early model's
    BLEU would read 0 instead of sacreBLEU's number, so the summed counts are scored by sacreBLEU itself.
    """

    full_state_update = False

    def __init__(self, tokenize: str = "13a", lowercase: bool = False, **kwargs: object) -> None:
        super().__init__(tokenize=tokenize, lowercase=lowercase, **kwargs)  # type: ignore[arg-type]

    def update(self, hypotheses: Sequence[str], references: Sequence[str]) -> None:  # type: ignore[override]
        """Add a batch of hypotheses and their references (one reference per hypothesis)."""
        _check_pairs(hypotheses, references)
        super().update(list(hypotheses), [[reference] for reference in references])

    def compute(self) -> Tensor:
        """The corpus score (0-100) of every sentence seen, smoothed as `sacrebleu.corpus_bleu` does."""
        score = BLEU.compute_bleu(
            self.numerator.long().tolist(),
            self.denominator.long().tolist(),
            int(self.preds_len),
            int(self.target_len),
            smooth_method="exp",
        ).score
        return torch.tensor(score, dtype=torch.float32, device=self.numerator.device)


class CorpusChrF(Metric):
    """sacreBLEU corpus chrF (0-100); `word_order=2` gives chrF++. Per-order statistics sum in one int64 state.

    Home-made because torchmetrics' CHRFScore scores differently: it averages per-order F-scores (sacreBLEU 1.x)
    with no effective order, where sacreBLEU 2 takes the F-score of precision and recall averaged over the orders
    that occur, so a perfect three-character hypothesis gets 75, not 100. sacreBLEU has no public per-sentence
    statistics for chrF, so its `_extract_corpus_statistics` / `_compute_score_from_stats` are called.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    stats: Tensor

    def __init__(
        self, char_order: int = 6, word_order: int = 0, beta: int = 2, lowercase: bool = False, **kwargs: object
    ) -> None:
        super().__init__(**kwargs)
        self.scorer = CHRF(char_order=char_order, word_order=word_order, beta=beta, lowercase=lowercase)
        size = 3 * self.scorer.order  # (hypothesis, reference, match) per order
        self.add_state("stats", default=torch.zeros(size, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, hypotheses: Sequence[str], references: Sequence[str]) -> None:
        """Add a batch of hypotheses and their references (one reference per hypothesis)."""
        _check_pairs(hypotheses, references)
        if not hypotheses:
            return
        per_sentence = self.scorer._extract_corpus_statistics(list(hypotheses), [list(references)])
        self.stats += torch.tensor(per_sentence, dtype=torch.long, device=self.stats.device).sum(0)

    def compute(self) -> Tensor:
        """The corpus score (0-100) of every sentence seen, from the summed statistics."""
        score = self.scorer._compute_score_from_stats(self.stats.tolist()).score
        return torch.tensor(score, dtype=torch.float32, device=self.stats.device)


class RougeScore(Metric):
    """Mean ROUGE F-measure over sentences (0-100) for one key: rouge1, rouge2 or rougeL.

    Text is scored as torchmetrics' and Google's rouge_score do by default: lowercased, every run of
    characters other than a-z and 0-9 becomes a space (so non-ASCII letters drop out), no stemming.
    An empty hypothesis or reference scores 0. Home-made around torchmetrics' functional `rouge_score` because
    the ROUGEScore class keeps one tensor per sentence in lists it all-gathers one element at a time: processes
    holding different numbers of sentences then issue different numbers of collectives and hang.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    f_sum: Tensor
    sentences: Tensor

    def __init__(self, key: RougeKey = "rougeL", **kwargs: object) -> None:
        super().__init__(**kwargs)
        if key not in ("rouge1", "rouge2", "rougeL"):
            raise ValueError(f"unknown ROUGE key {key!r}; expected one of rouge1, rouge2, rougeL")
        self.key = key
        self.add_state("f_sum", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("sentences", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, hypotheses: Sequence[str], references: Sequence[str]) -> None:
        """Add a batch of hypotheses and their references (one reference per hypothesis)."""
        _check_pairs(hypotheses, references)
        for hypothesis, reference in zip(hypotheses, references, strict=True):
            scores = rouge_score(hypothesis, reference, rouge_keys=self.key)
            self.f_sum += scores[f"{self.key}_fmeasure"].double().to(self.f_sum.device)
        self.sentences += len(hypotheses)

    def compute(self) -> Tensor:
        """100 x the mean F-measure over every sentence seen."""
        return (100.0 * self.f_sum / self.sentences).float()


GENERATION_METRIC_NAMES = ("bleu", "chrf", "rouge1", "rouge2", "rougeL")


def generation_metrics(names: Sequence[str], bleu_tokenize: str = "13a") -> dict[str, Metric]:
    """Fresh metrics by name (bleu, chrf, rouge1, rouge2, rougeL), each updated with (hypotheses, references).

    `bleu_tokenize` is sacreBLEU's tokenizer for BLEU ("13a"; "zh", "ja-mecab", "char", ... for other scripts).
    """
    unknown = [name for name in names if name not in GENERATION_METRIC_NAMES]
    if unknown:
        raise ValueError(
            f"unknown generation metric(s) {', '.join(map(repr, unknown))}; "
            f"expected any of {', '.join(GENERATION_METRIC_NAMES)}"
        )
    return {name: _metric(name, bleu_tokenize) for name in names}


def _metric(name: str, bleu_tokenize: str) -> Metric:
    """One fresh metric for a known name."""
    if name == "bleu":
        return CorpusBLEU(tokenize=bleu_tokenize)
    if name == "chrf":
        return CorpusChrF()
    return RougeScore(name)  # type: ignore[arg-type]  # a RougeKey: the names were checked


def _check_pairs(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    """Hypotheses and references are lists of strings of one length."""
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("hypotheses and references must be lists of strings, not one string")
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
