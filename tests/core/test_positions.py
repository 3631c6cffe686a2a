"""Position encodings against their published formulas: sinusoidal, T5 buckets, ALiBi and RoPE."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from tetraformer.core.positions import (
    ALiBi,
    RelativePositionBias,
    Rotary,
    SinusoidalPositions,
    alibi_slopes,
    relative_position_bucket,
    sinusoidal_table,
)

# T5 buckets (num_buckets=32, max_distance=128), worked by hand from T5's formula:
# bidirectional: 16 buckets a side, exact below 8, else 8 + floor(log(n/8) / log(16) * 8) capped at 15,
#   plus 16 when key is after query. causal: exact below 16, else 16 + floor(log(n/16) / log(8) * 16)
#   capped at 31, with n = max(query - key, 0). E.g. n=50: log(6.25)/log(16)*8 = 5.29 -> 13;
#   causal n=50: log(3.125)/log(8)*16 = 8.77 -> 24; n=127: 7.98 -> 15 and 15.94 -> 31.
RELATIVE = [
    -500,
    -128,
    -127,
    -64,
    -50,
    -32,
    -20,
    -16,
    -15,
    -8,
    -7,
    -1,
    0,
    1,
    7,
    8,
    15,
    16,
    20,
    32,
    50,
    64,
    127,
    128,
    500,
]
BIDIRECTIONAL = [15, 15, 15, 14, 13, 12, 10, 10, 9, 8, 7, 1, 0, 17, 23, 24, 25, 26, 26, 28, 29, 30, 31, 31, 31]
CAUSAL = [31, 31, 31, 26, 24, 21, 17, 16, 15, 8, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]


@pytest.mark.parametrize("dim", [32, 8, 7])
def test_sinusoidal_table_matches_formula(dim: int) -> None:
    """PE(p, 2i) = sin(p / 10000^(2i/d)) and PE(p, 2i+1) = cos(p / 10000^(2i/d)), computed with math."""
    expected = torch.zeros(50, dim)
    for p in range(50):
        for j in range(dim):
            angle = p / 10000 ** (2 * (j // 2) / dim)
            expected[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    assert_close(sinusoidal_table(50, dim), expected, atol=1e-6, rtol=0)


def test_sinusoidal_positions_look_up_rows() -> None:
    """The module returns the table rows of the positions it is given."""
    module = SinusoidalPositions(20, 16)
    positions = torch.tensor([[3, 0, 19]])
    assert_close(module(positions), sinusoidal_table(20, 16)[positions])


@pytest.mark.parametrize(("bidirectional", "expected"), [(True, BIDIRECTIONAL), (False, CAUSAL)])
def test_relative_buckets_match_hand_table(bidirectional: bool, expected: list[int]) -> None:
    """relative = key - query is bucketed as in T5 (num_buckets=32, max_distance=128)."""
    buckets = relative_position_bucket(torch.tensor(RELATIVE), bidirectional, 32, 128)
    assert buckets.tolist() == expected


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (16, 64), (8, 20)])
def test_relative_buckets_match_transformers(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    """Every distance in [-300, 300] lands in the bucket transformers' T5Attention picks."""
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = torch.arange(-300, 301)
    ours = relative_position_bucket(relative, bidirectional, num_buckets, max_distance)
    theirs = T5Attention._relative_position_bucket(relative, bidirectional, num_buckets, max_distance)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_bias_with_offset_is_a_slice_of_the_full_bias(bidirectional: bool) -> None:
    """Queries at offset..offset+Tq see the rows the full square bias gives those positions."""
    module = RelativePositionBias(n_heads=2, num_buckets=32, max_distance=128, bidirectional=bidirectional)
    full = module(10, 10)  # (1, H, 10, 10)
    assert full.shape == (1, 2, 10, 10)
    assert_close(module(3, 10, offset=7), full[:, :, 7:])
    buckets = relative_position_bucket(torch.tensor(2 - 5), bidirectional, 32, 128)
    assert_close(full[0, :, 5, 2], module.bias.weight[buckets])


@pytest.mark.parametrize(
    ("n_heads", "expected"),
    [
        (2, [2**-4, 2**-8]),
        (8, [2**-k for k in range(1, 9)]),
        (4, [2**-2, 2**-4, 2**-6, 2**-8]),
        (6, [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]),  # 4 heads, then every other slope of 8 heads
    ],
)
def test_alibi_slopes(n_heads: int, expected: list[float]) -> None:
    """Slopes follow the ALiBi paper's geometric sequence and its non-power-of-2 interleaving."""
    assert_close(alibi_slopes(n_heads), torch.tensor(expected))


def test_alibi_bias_is_minus_slope_times_distance() -> None:
    """bias[h, i, j] = -slope_h * |i - j|; an offset query row equals the full row."""
    module = ALiBi(n_heads=4)
    bias = module(6, 6)
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    expected = -alibi_slopes(4)[:, None, None] * (i - j).abs()
    assert_close(bias[0], expected)
    assert_close(module(1, 6, offset=5), bias[:, :, 5:])


def _rope_score(rope: Rotary, q: torch.Tensor, k: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """q rotated to position m dotted with k rotated to position n."""
    cos_m, sin_m = rope.angles(1, offset=m)
    cos_n, sin_n = rope.angles(1, offset=n)
    return (rope(q, cos_m, sin_m) * rope(k, cos_n, sin_n)).sum()


@pytest.mark.parametrize("fraction", [1.0, 0.5])
@pytest.mark.parametrize(("m", "n", "shift"), [(0, 0, 5), (3, 1, 7), (2, 9, 30), (17, 4, 1)])
def test_rope_score_depends_only_on_offset(fraction: float, m: int, n: int, shift: int) -> None:
    """q(m)·k(n) equals q(m+s)·k(n+s), and differs once the offset m - n changes."""
    rope = Rotary(head_dim=16, fraction=fraction)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    score = _rope_score(rope, q, k, m, n)
    assert_close(_rope_score(rope, q, k, m + shift, n + shift), score, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(_rope_score(rope, q, k, m, n + 1), score, atol=1e-3)


def test_rope_rotates_pairs_and_keeps_the_rest() -> None:
    """RoPE preserves norms, is the identity at position 0, and leaves un-rotated dims alone."""
    rope = Rotary(head_dim=16, fraction=0.5)  # rotates the first 8 dims
    x = torch.randn(2, 2, 5, 16)
    cos, sin = rope.angles(5, offset=3)
    y = rope(x, cos, sin)
    assert_close(y.norm(dim=-1), x.norm(dim=-1))
    assert_close(y[..., 8:], x[..., 8:])
    assert not torch.allclose(y[..., :8], x[..., :8])
    assert_close(rope(x, *rope.angles(5))[..., 0, :], x[..., 0, :])


def test_rope_angles_with_offset_are_a_slice() -> None:
    """angles(T, offset) are rows offset..offset+T of the table from position 0."""
    rope = Rotary(head_dim=8)
    cos, sin = rope.angles(10)
    cos_o, sin_o = rope.angles(4, offset=6)
    assert_close(cos_o, cos[6:])
    assert_close(sin_o, sin[6:])
