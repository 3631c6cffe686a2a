"""A ViT patch embedding takes a source trained at another image size or channel count (adapt_source_state)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.testing import assert_close

from tetraformer.core import PatchEmbedding, TransformerConfig, resize_position_grid

Config = Callable[..., TransformerConfig]


def embedding(tiny_config: Config, **kw: int) -> PatchEmbedding:
    """A patch embedding with learned positions, 8-pixel patches unless told."""
    return PatchEmbedding(tiny_config(**{"patch_size": 8, "vocab_size": 0, "position": "learned", **kw}))


def trained(tiny_config: Config, **kw: int) -> PatchEmbedding:
    """A patch embedding with random (not initial) [CLS], positions and projection."""
    torch.manual_seed(0)
    embed = embedding(tiny_config, **kw)
    for param in embed.parameters():
        torch.nn.init.normal_(param)
    return embed.eval()


def adapted(source: PatchEmbedding, target: PatchEmbedding) -> tuple[PatchEmbedding, list[str]]:
    """`target` loaded from `source`'s state after its hook fitted it; and what the hook said."""
    state = {f"embed.{k}": v for k, v in source.state_dict().items()}
    changes = target.adapt_source_state(state, "embed.")
    target.load_state_dict({k[len("embed.") :]: v for k, v in state.items()})
    return target.eval(), changes


@pytest.mark.parametrize(("size_a", "size_b"), [(16, 32), (32, 24), (24, 48)])
def test_resized_table_equals_interpolating_at_every_forward(tiny_config: Config, size_a: int, size_b: int) -> None:
    """Built at size B from a size-A source: the same embeddings the source gives B-sized images."""
    source = trained(tiny_config, image_size=size_a)
    target, changes = adapted(source, embedding(tiny_config, image_size=size_b))
    a, b = size_a // 8, size_b // 8
    assert changes == [f"positions resized from {a}x{a} to {b}x{b} patches"]
    pixels = torch.randn(2, 3, size_b, size_b)
    assert_close(target(pixels), source(pixels))
    assert_close(target.positions.weight[0], source.positions.weight[0])  # [CLS] keeps its position


def test_same_shapes_change_nothing(tiny_config: Config) -> None:
    """A source of the model's own shape is left exactly as it is, and nothing is reported."""
    source = trained(tiny_config, image_size=16)
    target, changes = adapted(source, embedding(tiny_config, image_size=16))
    assert changes == []
    assert all(torch.equal(v, target.state_dict()[k]) for k, v in source.state_dict().items())


def test_resize_to_the_same_grid_is_the_identity() -> None:
    """Bicubic resizing to the grid it already has returns the table."""
    table = torch.randn(1 + 5 * 5, 8)
    assert_close(resize_position_grid(table, (5, 5)), table)
    assert resize_position_grid(table, (3, 7)).shape == (1 + 3 * 7, 8)


def test_rgb_source_serves_grayscale_exactly(tiny_config: Config) -> None:
    """3 -> 1 channels sums the projection: a gray image gives what the RGB source gives it replicated."""
    source = trained(tiny_config, image_size=16)
    target, changes = adapted(source, embedding(tiny_config, image_size=16, n_channels=1))
    assert changes == ["patch projection converted from 3 to 1 channels"]
    gray = torch.randn(2, 1, 16, 16)
    assert_close(target(gray), source(gray.expand(-1, 3, -1, -1)))


def test_grayscale_source_serves_rgb_through_the_channel_mean(tiny_config: Config) -> None:
    """1 -> 3 channels repeats the projection / 3: an RGB image gives what the gray source gives its mean."""
    source = trained(tiny_config, image_size=16, n_channels=1)
    target, changes = adapted(source, embedding(tiny_config, image_size=32))
    assert changes == ["patch projection converted from 1 to 3 channels", "positions resized from 2x2 to 4x4 patches"]
    rgb = torch.randn(2, 3, 32, 32)
    assert_close(target(rgb), source(rgb.mean(dim=1, keepdim=True)))


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (dict(patch_size=4), r"source's patches are 8x8 pixels, this model's 4x4: .*\(set patch_size 8\)"),
        (dict(n_channels=4), r"reads 3 channels, this model 4: only 1 <-> N .*\(set n_channels"),
    ],
)
def test_what_has_no_principled_conversion_is_refused(tiny_config: Config, target: dict, message: str) -> None:
    """Another patch size, or 3 -> 4 channels, is an error saying what to set."""
    source = trained(tiny_config, image_size=16)
    with pytest.raises(ValueError, match=message):
        adapted(source, embedding(tiny_config, **{"image_size": 16, **target}))


def test_a_table_that_is_not_cls_plus_a_square_grid_is_refused(tiny_config: Config) -> None:
    """A position table of 1 + 6 rows cannot be a grid of patches."""
    target = embedding(tiny_config, image_size=16)
    with pytest.raises(ValueError, match="7 positions are not \\[CLS\\] \\+ a square grid"):
        target.adapt_source_state({"positions.weight": torch.zeros(7, 32)}, "")
