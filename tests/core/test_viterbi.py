"""Constrained decoding: never an invalid transition, the brute-force optimum, argmax when all is allowed; chain
marginals: the brute-force probabilities of the same sequences, holes skipped."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import Tensor

from tetraformer.core.viterbi import IGNORE_INDEX, chain_marginals, constrained_decode
from tetraformer.data.tag_schemes import allowed_transitions

SCHEME_LABELS = {
    "IOB2": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
    "BIOES": ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"],
}


def is_allowed(path: list[int], trans: Tensor, start: Tensor, end: Tensor) -> bool:
    """Whether a label sequence starts, steps and ends only as allowed."""
    steps = all(bool(trans[a, b]) for a, b in itertools.pairwise(path))
    return bool(start[path[0]]) and steps and bool(end[path[-1]])


def brute_force(scores: Tensor, trans: Tensor, start: Tensor, end: Tensor) -> tuple[float, list[int]]:
    """The best total score and sequence over every allowed sequence of a (W, L) score matrix."""
    w, n = scores.shape
    best = (float("-inf"), [])
    for path in itertools.product(range(n), repeat=w):
        if is_allowed(list(path), trans, start, end):
            total = float(scores[torch.arange(w), torch.tensor(path)].sum())
            best = max(best, (total, list(path)))
    return best


def real(labels: Tensor, mask: Tensor, row: int) -> list[int]:
    """A row's decoded labels at its True positions."""
    return labels[row][mask[row]].tolist()


@pytest.mark.parametrize("scheme", ["IOB2", "BIOES"])
def test_never_emits_an_invalid_transition(scheme: str) -> None:
    """On random scores (which argmax would decode into broken sequences) every row is a valid sequence."""
    start, trans, end = allowed_transitions(SCHEME_LABELS[scheme], scheme)
    broken = 0
    for seed in range(30):
        generator = torch.Generator().manual_seed(seed)
        scores = torch.randn(6, 9, len(SCHEME_LABELS[scheme]), generator=generator) * 3
        lengths = torch.randint(1, 10, (6,), generator=generator)
        mask = torch.arange(9) < lengths.unsqueeze(1)  # (B, W) prefixes of random lengths
        labels = constrained_decode(scores, mask, trans, start, end)
        greedy = scores.argmax(-1)
        for row in range(6):
            assert is_allowed(real(labels, mask, row), trans, start, end)
            broken += not is_allowed(greedy[row][mask[row]].tolist(), trans, start, end)
        assert (labels[~mask] == IGNORE_INDEX).all()
    assert broken > 50  # the constraint had work to do


@pytest.mark.parametrize("seed", range(6))
def test_equals_brute_force_on_small_cases(seed: int) -> None:
    """For W <= 4 and random constraints, the decoded sequence has the best total score of all allowed ones."""
    generator = torch.Generator().manual_seed(seed)
    n, w = 3, 4
    trans = torch.rand(n, n, generator=generator) < 0.6
    start, end = torch.rand(n, generator=generator) < 0.7, torch.rand(n, generator=generator) < 0.7
    start[0] = end[0] = trans[0, 0] = True  # label 0 repeated is always allowed: some sequence exists
    scores = torch.randn(3, w, n, generator=generator)
    mask = torch.tensor([[True] * 4, [True] * 2 + [False] * 2, [True] + [False] * 3])
    labels = constrained_decode(scores, mask, trans, start, end)
    for row in range(3):
        length = int(mask[row].sum())
        total, path = brute_force(scores[row, :length], trans, start, end)
        decoded = real(labels, mask, row)
        assert float(scores[row, torch.arange(length), torch.tensor(decoded)].sum()) == pytest.approx(total)
        assert is_allowed(decoded, trans, start, end) and decoded == path


def test_equals_argmax_when_everything_is_allowed() -> None:
    """With no constraint, the best sequence is each position's best label."""
    scores = torch.randn(4, 7, 5, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(4, 7, dtype=torch.bool)
    everything = torch.ones(5, 5, dtype=torch.bool), torch.ones(5, dtype=torch.bool), torch.ones(5, dtype=torch.bool)
    assert torch.equal(constrained_decode(scores, mask, *everything), scores.argmax(-1))


def test_respects_start_and_end() -> None:
    """A label that may not start (or end) a sequence is avoided there even when it scores best."""
    n = 3
    trans, everything = torch.ones(n, n, dtype=torch.bool), torch.ones(n, dtype=torch.bool)
    scores = torch.zeros(1, 3, n)
    scores[0, :, 2] = 5.0  # label 2 is best everywhere
    scores[0, :, 1] = 1.0
    not_two = torch.tensor([True, True, False])
    mask = torch.ones(1, 3, dtype=torch.bool)
    assert constrained_decode(scores, mask, trans, not_two, everything).tolist() == [[1, 2, 2]]
    assert constrained_decode(scores, mask, trans, everything, not_two).tolist() == [[2, 2, 1]]


def test_rows_of_different_lengths_and_holes_decode_alone() -> None:
    """Each row decodes as if alone: a padded row gives its unpadded answer; a hole joins its two sides."""
    labels = SCHEME_LABELS["BIOES"]
    start, trans, end = allowed_transitions(labels, "BIOES")
    trans_args = trans, start, end
    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(3, 6, len(labels), generator=generator) * 3
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 1, 1, 0, 1]], dtype=torch.bool)
    batch = constrained_decode(scores, mask, *trans_args)
    for row in range(3):
        alone = scores[row][mask[row]].unsqueeze(0)  # (1, W_row, L)
        expected = constrained_decode(alone, torch.ones(alone.shape[:2], dtype=torch.bool), *trans_args)
        assert real(batch, mask, row) == expected[0].tolist()
    assert (batch[~mask] == IGNORE_INDEX).all() and batch.dtype == torch.long
    empty = constrained_decode(scores[:1], torch.zeros(1, 6, dtype=torch.bool), *trans_args)
    assert (empty == IGNORE_INDEX).all()


def brute_marginals(scores: Tensor, trans: Tensor, start: Tensor, end: Tensor) -> Tensor:
    """(W, L) each position's label probability over every sequence of a (W, L) score matrix, each weighted by the
    exp of its scores plus its transition scores (float transitions, -inf where not allowed)."""
    w, n = scores.shape
    totals = torch.zeros(w, n, dtype=torch.float64)
    for path in itertools.product(range(n), repeat=w):
        steps = sum(float(trans[a, b]) for a, b in itertools.pairwise(path))
        total = float(scores[torch.arange(w), torch.tensor(path)].sum()) + steps + float(start[path[0]] + end[path[-1]])
        for t, label in enumerate(path):
            totals[t, label] += torch.tensor(total, dtype=torch.float64).exp()
    return (totals / totals[0].sum()).float()


@pytest.mark.parametrize("seed", range(4))
def test_marginals_equal_brute_force_with_holes(seed: int) -> None:
    """Forward-backward gives each position the probability the enumeration of all sequences gives it, under learned
    scores with forbidden steps; a hole is skipped; every real position's probabilities sum to 1."""
    generator = torch.Generator().manual_seed(seed)
    n = 3
    trans = torch.randn(n, n, generator=generator)
    trans[torch.rand(n, n, generator=generator) < 0.3] = float("-inf")
    trans[0, 0] = 0.0  # label 0 repeated is always allowed: some sequence exists
    start, end = torch.randn(n, generator=generator), torch.randn(n, generator=generator)
    start[1], start[0], end[0] = float("-inf"), 0.0, 0.0
    scores = torch.randn(2, 5, n, generator=generator) * 2
    mask = torch.tensor([[True, False, True, True, False], [True] * 5])
    marginals = chain_marginals(scores, mask, trans, start, end)
    for row in range(2):
        expected = brute_marginals(scores[row][mask[row]], trans, start, end)
        assert torch.allclose(marginals[row][mask[row]], expected, atol=1e-5)
    assert (marginals[~mask] == 0).all() and torch.allclose(marginals[mask].sum(-1), torch.ones(int(mask.sum())))
    assert (marginals[:, :, 1][:, 0] == 0).all()  # no sequence starts with label 1


def test_marginals_pick_what_viterbi_picks_when_one_sequence_dominates() -> None:
    """With bool constraints, scores that favour one allowed sequence strongly give its labels probability near 1."""
    labels = SCHEME_LABELS["IOB2"]
    start, trans, end = allowed_transitions(labels, "IOB2")
    scores = torch.full((1, 4, len(labels)), -8.0)
    scores[0, torch.arange(4), torch.tensor([1, 2, 0, 3])] = 8.0  # B-PER I-PER O B-LOC
    mask = torch.ones(1, 4, dtype=torch.bool)
    marginals = chain_marginals(scores, mask, trans, start, end)
    decoded = constrained_decode(scores, mask, trans, start, end)
    assert decoded[0].tolist() == [1, 2, 0, 3] and (marginals[0, torch.arange(4), decoded[0]] > 0.99).all()
