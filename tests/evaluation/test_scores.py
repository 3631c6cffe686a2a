"""The results file of `tetraformer evaluate`: lm-eval's results as task -> metric -> value and stderr."""

from __future__ import annotations

import math
from pathlib import Path

from tetraformer.evaluation.scores import flat_scores, harness_scores, read_scores, scores_table, write_scores


def test_metrics_filters_and_missing_stderrs(tmp_path: Path) -> None:
    """`acc,none` becomes `acc` with its `acc_stderr,none`; another filter stays in the name; an "N/A" stderr and an
    infinite value become null; the alias and counts are left out; the file reads back and flattens per column."""
    results = {
        "results": {
            "quiz": {"alias": "quiz", "sample_len": 20, "acc,none": 0.35, "acc_stderr,none": 0.11},
            "gen": {"exact_match,strict-match": 0.5, "exact_match_stderr,strict-match": "N/A"},
            "text": {"word_perplexity,none": math.inf, "word_perplexity_stderr,none": "N/A"},
        }
    }
    scores = harness_scores(results)
    assert scores == {
        "quiz": {"acc": {"value": 0.35, "stderr": 0.11}},
        "gen": {"exact_match,strict-match": {"value": 0.5, "stderr": None}},
        "text": {"word_perplexity": {"value": None, "stderr": None}},
    }
    path = write_scores(tmp_path / "out" / "scores.json", scores, checkpoint="a.ckpt")
    assert read_scores(path) == scores
    assert flat_scores(scores) == {"quiz/acc": 0.35, "gen/exact_match,strict-match": 0.5, "text/word_perplexity": None}
    assert "| quiz | acc | 0.3500 | 0.1100 |" in scores_table(scores)
