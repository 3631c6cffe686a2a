"""Predict-output pieces the tasks share: the keys of a prediction row, and the k most likely classes of each row."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

DECIMALS = 6  # probabilities in predict rows are rounded to this many places
# the keys of predict rows, the same in every task; none is a field name an input is likely to bring (a gold `label`
# or `tags` stays beside the prediction)
PREDICTED = "predicted"  # the predicted label (text, image), labels (multi-label) or tag per word (tokens)
PROBABILITIES = "probabilities"  # {label: probability} of the top-k labels, best first
GENERATED = "generated"  # the generated text (language modelling, seq2seq; `tetraformer generate` too)


def top_k(probs: Tensor, k: int) -> list[list[tuple[int, float]]]:
    """(N, C) probabilities -> per row its min(k, C) most likely (class id, rounded probability), best first."""
    top = probs.topk(min(k, probs.shape[-1]), dim=-1)  # (N, k) values and indices
    return [
        [(i, round(p, DECIMALS)) for i, p in zip(ids, values, strict=True)]
        for ids, values in zip(top.indices.tolist(), top.values.tolist(), strict=True)
    ]


def top_k_labels(probs: Tensor, names: Sequence[str], k: int) -> list[dict[str, float]]:
    """(N, C) probabilities -> per row {label name: probability} of its k most likely labels, best first."""
    return [{names[i]: p for i, p in row} for row in top_k(probs, k)]
