"""The one-row LM-head copy: the same logits as F.linear, made only where timed faster, gone on exit."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from tetraformer.accel.chooser import ROUNDS
from tetraformer.accel.lm_head_row import RowLinear, one_row_projection
from tetraformer.core import LMHead, TransformerConfig

Config = Callable[..., TransformerConfig]


@pytest.mark.parametrize("rescale", [False, True])
def test_one_row_copy_gives_the_same_logits_and_cleans_up(
    tiny_config: Config, rescale: bool, prefer: Callable[[str], list[str]]
) -> None:
    """Within one_row_projection a single row goes through the transposed copy where it was timed faster (the
    same logits as F.linear); more rows keep F.linear; nothing stays after."""
    prefer("rows")
    head = LMHead(tiny_config(rescale_tied_logits=rescale), nn.Embedding(100, 32))
    row, rows = torch.randn(1, 1, 32), torch.randn(2, 1, 32)
    with torch.no_grad(), one_row_projection(head.proj):
        assert type(head.proj) is RowLinear and head.proj.row_weight.shape == (32, 100)
        inside_row, inside_rows = head(row), head(rows)
    assert type(head.proj) is nn.Linear and not hasattr(head.proj, "row_weight")
    with torch.no_grad():
        assert_close(inside_row, head(row))
        assert torch.equal(inside_rows, head(rows))  # more than one row: the usual F.linear
    assert list(head.state_dict()) == ["proj.weight"]


def test_one_row_copy_not_made_where_f_linear_was_timed_faster(
    tiny_config: Config, prefer: Callable[[str], list[str]]
) -> None:
    """The choice is measured: where F.linear wins, no copy is made; the timing happens once per shape."""
    keys = prefer("linear")
    head = LMHead(tiny_config(), nn.Embedding(100, 32))
    for _ in range(2):
        with torch.no_grad(), one_row_projection(head.proj):
            assert type(head.proj) is nn.Linear
    assert set(keys) == {"row 1x32x100 torch.float32"} and len(keys) == 2 * ROUNDS  # two candidates, one choice


def test_hooks_on_the_projection_keep_firing(tiny_config: Config, prefer: Callable[[str], list[str]]) -> None:
    """The copy stands in for the projection's own forward, so its hooks still see every call."""
    prefer("rows")
    head = LMHead(tiny_config(), nn.Embedding(100, 32))
    calls = []
    head.proj.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad(), one_row_projection(head.proj):
        head(torch.randn(1, 1, 32))
    assert calls == [1]


def test_projections_it_cannot_stand_in_for_are_left_alone(prefer: Callable[[str], list[str]]) -> None:
    """A bias, or autocast (whose bf16 matmul the copy would bypass), keeps F.linear."""
    prefer("rows")
    biased, plain = nn.Linear(32, 100), nn.Linear(32, 100, bias=False)
    with one_row_projection(biased):
        assert type(biased) is nn.Linear
    with torch.autocast("cpu", dtype=torch.bfloat16), one_row_projection(plain):
        assert type(plain) is nn.Linear
