"""Input embeddings: token/segment/position sums and ViT patches at any divisible size and channel count."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.testing import assert_close

from tetraformer.core import ImageEncoder, PatchEmbedding, TokenEmbedding, TransformerConfig

Config = Callable[..., TransformerConfig]


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "none"])
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize(("height", "width"), [(32, 32), (24, 40), (8, 16), (48, 48)])
def test_patch_embedding_any_divisible_size_and_channels(
    tiny_config: Config, position: str, channels: int, height: int, width: int
) -> None:
    """(B, C, H, W) -> (B, 1 + (H/P)(W/P), D) for any H, W divisible by P and any channel count."""
    cfg = tiny_config(image_size=32, patch_size=8, n_channels=channels, position=position, vocab_size=0)
    embed = PatchEmbedding(cfg)
    x = embed(torch.randn(2, channels, height, width))
    assert x.shape == (2, 1 + (height // 8) * (width // 8), 32)
    assert torch.isfinite(x).all()


@pytest.mark.parametrize(("height", "width"), [(30, 32), (32, 20), (7, 7)])
def test_patch_embedding_rejects_indivisible_sizes(tiny_config: Config, height: int, width: int) -> None:
    """A size the patch does not divide raises a ValueError that names both."""
    embed = PatchEmbedding(tiny_config(image_size=32, patch_size=8, vocab_size=0))
    with pytest.raises(ValueError, match=f"{height}x{width} is not divisible by patch size 8"):
        embed(torch.randn(1, 3, height, width))


def test_patch_embedding_at_trained_size_is_conv_plus_cls_plus_table(tiny_config: Config) -> None:
    """At the configured size: row 0 is [CLS] + its position, the rest conv patches + theirs."""
    embed = PatchEmbedding(tiny_config(image_size=16, patch_size=8, vocab_size=0, position="learned"))
    torch.nn.init.normal_(embed.cls)
    pixels = torch.randn(1, 3, 16, 16)
    table = embed.positions.weight  # (1 + 4, D)
    patches = embed.proj(pixels).flatten(2).transpose(1, 2)[0]  # (4, D)
    x = embed(pixels)[0]
    assert_close(x[0], embed.cls[0, 0] + table[0])
    assert_close(x[1:], patches + table[1:])


def test_patch_positions_interpolate_to_a_new_grid(tiny_config: Config) -> None:
    """A larger grid gets a resized position table; the [CLS] row keeps its trained position."""
    embed = PatchEmbedding(tiny_config(image_size=16, patch_size=8, vocab_size=0, position="learned"))
    x = embed(torch.zeros(1, 3, 32, 48))[0]  # zero pixels: every patch is the conv bias
    assert x.shape == (1 + 4 * 6, 32)
    assert_close(x[0], embed.cls[0, 0] + embed.positions.weight[0])
    assert not torch.allclose(x[1], x[2])  # patches differ only through their positions


def test_image_encoder_channel_mismatch_fails(tiny_config: Config) -> None:
    """Images with a channel count other than the configured one are rejected by the patch conv."""
    model = ImageEncoder(tiny_config(image_size=16, patch_size=8, n_channels=1, vocab_size=0))
    with pytest.raises(RuntimeError):
        model(torch.randn(1, 3, 16, 16))


@pytest.mark.parametrize("position", ["learned", "sinusoidal"])
def test_token_embedding_offset_continues_positions(tiny_config: Config, position: str) -> None:
    """Embedding a suffix at offset k equals the tail of embedding the whole sequence."""
    embed = TokenEmbedding(tiny_config(position=position)).eval()
    ids = torch.randint(0, 100, (2, 9))
    assert_close(embed(ids[:, 4:], offset=4), embed(ids)[:, 4:])
    assert not torch.allclose(embed(ids[:, 4:]), embed(ids)[:, 4:])


def test_token_embedding_rejects_sequences_past_max_len(tiny_config: Config) -> None:
    """Absolute position tables cannot be read past max_len; the error says so."""
    embed = TokenEmbedding(tiny_config(position="learned", max_len=8))
    embed(torch.zeros(1, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="exceeds max_len=8"):
        embed(torch.zeros(1, 3, dtype=torch.long), offset=6)


def test_token_embedding_segments_and_scaling(tiny_config: Config) -> None:
    """Segment ids add their own vector; scale_embeddings multiplies token vectors by sqrt(d_model)."""
    embed = TokenEmbedding(tiny_config(position="none", type_vocab_size=2, scale_embeddings=True))
    ids = torch.tensor([[5, 6]])
    types = torch.tensor([[0, 1]])
    expected = embed.tokens(ids) * 32**0.5 + embed.types(types)
    assert_close(embed(ids, types), expected)
    assert_close(embed(ids), embed.tokens(ids) * 32**0.5 + embed.types.weight[0])
