"""Fixed 2D sin-cos positions of ViT patches: rows in one half of the channels, columns in the other."""

from __future__ import annotations

import torch

from tetraformer.core import ImageEncoder, TransformerConfig
from tetraformer.core.embeddings import PatchEmbedding
from tetraformer.core.positions import sinusoidal_2d_table, sinusoidal_table

CFG = TransformerConfig(
    d_model=16,
    n_heads=2,
    n_layers=1,
    d_ff=32,
    vocab_size=0,
    image_size=16,
    patch_size=4,
    n_channels=1,
    position="sinusoidal",
)


def test_cls_is_zero_and_halves_encode_row_and_column() -> None:
    """[CLS] gets zeros; patches of one row share the first half; patches of one column share the second
    half."""
    table = sinusoidal_2d_table(3, 5, 16)  # (1 + 15, 16)
    assert table.shape == (16, 16) and torch.equal(table[0], torch.zeros(16))
    grid = table[1:].reshape(3, 5, 16)
    assert torch.equal(grid[1, 0, :8], grid[1, 4, :8]) and not torch.equal(grid[0, 0, :8], grid[1, 0, :8])
    assert torch.equal(grid[0, 2, 8:], grid[2, 2, 8:]) and not torch.equal(grid[0, 2, 8:], grid[0, 3, 8:])
    assert torch.equal(grid[2, 3, :8], sinusoidal_table(3, 8)[2]) and torch.equal(
        grid[2, 3, 8:], sinusoidal_table(5, 8)[3]
    )


def test_sinusoidal_patch_embedding_has_no_position_weights_and_serves_any_grid() -> None:
    """The table is a fixed buffer (not in the state dict); another image size gets its own grid's table."""
    embed = PatchEmbedding(CFG)
    assert not any("position" in key or "table" in key for key in embed.state_dict())
    x = torch.randn(2, 1, 16, 24)  # a 4 x 6 grid instead of the trained 4 x 4
    with torch.no_grad():
        out = embed(x)
        expected = torch.cat((embed.cls.expand(2, -1, -1), embed.proj(x).flatten(2).transpose(1, 2)), dim=1)
    assert out.shape == (2, 25, 16)
    assert torch.allclose(out, expected + sinusoidal_2d_table(4, 6, 16)[None])


def test_learned_positions_unchanged() -> None:
    """A learned-position ViT still keeps its table as weights (HF parity is tested in tests/interop)."""
    encoder = ImageEncoder(CFG.replace(position="learned"))
    assert encoder.embed.positions.weight.shape == (17, 16) and "embed.positions.weight" in encoder.state_dict()
