"""Input embeddings: tokens (+ segments, + absolute positions) and image patches (+ [CLS])."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.core.config import TransformerConfig
from tetraformer.core.layers import make_norm
from tetraformer.core.position_layers import absolute_table
from tetraformer.core.positions import sinusoidal_2d_table


class TokenEmbedding(nn.Module):
    """Token ids (+ optional segment ids) -> vectors, with absolute positions added when configured."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.types = nn.Embedding(cfg.type_vocab_size, cfg.d_model) if cfg.type_vocab_size else None
        self.positions = absolute_table(cfg, cfg.max_len)
        self.norm = make_norm(cfg) if cfg.embedding_norm else nn.Identity()
        self.dropout = nn.Dropout(cfg.dropout)
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        self.max_len = cfg.max_len

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        offset: int = 0,
        position_ids: Tensor | None = None,
    ) -> Tensor:
        """(B, T) ids -> (B, T, D); offset is the first token's position, unless (B, T) position_ids are given."""
        x = self.tokens(input_ids)  # (B, T, D)
        if self.scale != 1.0:
            x = x * self.scale
        if self.types is not None:  # no ids: every token is segment 0 (a row add, cheaper than a lookup)
            x = x + (self.types(token_type_ids) if token_type_ids is not None else self.types.weight[0])
        if self.positions is not None and position_ids is not None:
            x = x + self.positions(position_ids)  # left-padded batches count positions over real tokens
        elif self.positions is not None:
            t = input_ids.shape[1]
            if offset + t > self.max_len:
                raise ValueError(f"sequence of {offset + t} positions exceeds max_len={self.max_len}")
            x = x + self.positions.span(offset, t)  # (T, D)
        x = self.norm(x)
        return self.dropout(x) if self.training else x


class PatchEmbedding(nn.Module):
    """Images -> [CLS] + one vector per patch, with learned positions interpolated to any grid.

    position "sinusoidal" adds a fixed 2D sin-cos table (half the channels the row, half the column), computed
    for whatever grid the image gives.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.patch_size, self.grid = cfg.patch_size, cfg.image_size // cfg.patch_size
        self.proj = nn.Conv2d(cfg.n_channels, cfg.d_model, cfg.patch_size, stride=cfg.patch_size)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.sinusoidal = cfg.position == "sinusoidal"
        self.positions = None if self.sinusoidal else absolute_table(cfg, self.grid**2 + 1)
        if self.sinusoidal:
            table = sinusoidal_2d_table(self.grid, self.grid, cfg.d_model)  # (1 + G*G, D)
            self.register_buffer("table_2d", table, persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, pixels: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, 1 + (H/P)*(W/P), D)."""
        b, _, h, w = pixels.shape
        if h % self.patch_size or w % self.patch_size:
            raise ValueError(f"image size {h}x{w} is not divisible by patch size {self.patch_size}")
        x = self.proj(pixels).flatten(2).transpose(1, 2)  # (B, N, D)
        x = torch.cat((self.cls.expand(b, -1, -1), x), dim=1)  # (B, 1 + N, D)
        gh, gw = h // self.patch_size, w // self.patch_size
        if self.sinusoidal:
            same = (gh, gw) == (self.grid, self.grid)
            table = self.table_2d if same else sinusoidal_2d_table(gh, gw, x.shape[-1])  # (1 + N, D)
            x = x + table.to(device=x.device, dtype=x.dtype)[None]
        elif self.positions is not None:
            x = x + self._position_table(gh, gw).to(x.dtype)
        return self.dropout(x)

    def _position_table(self, gh: int, gw: int) -> Tensor:
        """(1, 1 + gh*gw, D) positions: the trained grid, bicubically resized when the grid differs."""
        table = self.positions(torch.arange(self.grid**2 + 1, device=self.cls.device))  # (1 + G*G, D)
        if (gh, gw) == (self.grid, self.grid):
            return table[None]
        return resize_position_grid(table, (gh, gw))[None]

    def adapt_source_state(self, state: dict[str, Tensor], prefix: str) -> list[str]:
        """Fit a source's patch projection and position table (under `prefix`) to this embedding, in place.

        Positions trained on another grid are resized to this one (as HF's interpolate_pos_encoding does at
        every forward); a grayscale projection serves RGB by averaging over the channels, an RGB one serves
        grayscale by summing them (exact for gray images replicated to RGB). Returns what it changed.
        """
        changes = []
        proj = state.get(prefix + "proj.weight")  # (D, C, P, P)
        if proj is not None and proj.shape[2:] != self.proj.weight.shape[2:]:
            raise ValueError(
                f"the source's patches are {proj.shape[-1]}x{proj.shape[-1]} pixels, this model's "
                f"{self.patch_size}x{self.patch_size}: a pretrained patch embedding keeps its patch size "
                f"(set patch_size {proj.shape[-1]})"
            )
        if proj is not None and proj.shape[1] != self.proj.in_channels:
            state[prefix + "proj.weight"] = _convert_channels(proj, self.proj.in_channels)
            changes.append(f"patch projection converted from {proj.shape[1]} to {self.proj.in_channels} channels")
        table = state.get(prefix + "positions.weight")  # (1 + G*G, D)
        if isinstance(self.positions, nn.Embedding) and table is not None and len(table) != self.grid**2 + 1:
            old = math.isqrt(len(table) - 1)
            if old**2 + 1 != len(table):
                raise ValueError(f"the source's {len(table)} positions are not [CLS] + a square grid of patches")
            state[prefix + "positions.weight"] = resize_position_grid(table, (self.grid, self.grid))
            changes.append(f"positions resized from {old}x{old} to {self.grid}x{self.grid} patches")
        return changes


def resize_position_grid(table: Tensor, size: tuple[int, int]) -> Tensor:
    """(1 + G*G, D) positions, [CLS] first -> (1 + gh*gw, D): the G x G grid resized bicubically, [CLS] kept."""
    grid = math.isqrt(len(table) - 1)
    cls, rows = table[:1], table[1:].reshape(1, grid, grid, -1).permute(0, 3, 1, 2)  # (1, D, G, G)
    rows = F.interpolate(rows, size=size, mode="bicubic", align_corners=False)  # (1, D, gh, gw)
    return torch.cat((cls, rows.flatten(2).transpose(1, 2)[0]), dim=0)


def _convert_channels(proj: Tensor, channels: int) -> Tensor:
    """(D, C, P, P) patch projection -> (D, channels, P, P): 1 -> N repeats it / N, N -> 1 sums it."""
    if proj.shape[1] == 1:
        return proj.repeat(1, channels, 1, 1) / channels
    if channels == 1:
        return proj.sum(dim=1, keepdim=True)
    raise ValueError(
        f"the source's patch projection reads {proj.shape[1]} channels, this model {channels}: only 1 <-> N "
        "channel changes have a principled conversion (set n_channels to the source's)"
    )
