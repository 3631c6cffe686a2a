"""TransformerConfig: presets build, names are checked, the position table answers for every name."""

from __future__ import annotations

from typing import get_args

import pytest
import torch

from tetraformer.core import (
    POSITION_TYPES,
    PRESETS,
    ImageEncoder,
    TokenEmbedding,
    TransformerConfig,
    build_backbone,
)
from tetraformer.core.config import Position


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_its_backbones(name: str) -> None:
    """Each preset builds (on the meta device) every backbone kind it describes."""
    cfg = TransformerConfig.preset(name)
    with torch.device("meta"):
        if cfg.vocab_size == 0:
            assert ImageEncoder(cfg).cfg is cfg
            return
        for kind in ("encoder_decoder",) if cfg.is_encoder_decoder else ("encoder", "decoder"):
            assert build_backbone(cfg, kind).cfg.is_encoder_decoder == (kind == "encoder_decoder")


def test_position_types_cover_every_position_name() -> None:
    """The one position table describes exactly the names the config accepts."""
    assert set(POSITION_TYPES) == set(get_args(Position))


@pytest.mark.parametrize("position", get_args(Position))
def test_absolute_positions_means_a_table_in_the_embeddings(position: str) -> None:
    """cfg.absolute_positions is True exactly when the token embedding holds a position table."""
    cfg = TransformerConfig.preset("tiny", position=position)
    assert cfg.absolute_positions == (TokenEmbedding(cfg).positions is not None)
    assert cfg.position_type is POSITION_TYPES[position]


@pytest.mark.parametrize("field", ["norm", "norm_position", "activation", "position", "attention"])
def test_unknown_names_are_rejected_with_the_choices(field: str) -> None:
    """A misspelt choice raises a ValueError that names the field and the allowed values."""
    with pytest.raises(ValueError, match=f"{field}='bogus': must be one of: "):
        TransformerConfig(**{field: "bogus"})


def test_indivisible_heads_rejected_unless_d_head_given() -> None:
    """d_model must split into heads, unless an explicit d_head decouples them."""
    with pytest.raises(ValueError, match="n_heads=3: must divide d_model=32"):
        TransformerConfig(d_model=32, n_heads=3)
    cfg = TransformerConfig(d_model=32, n_heads=3, d_head=8)
    assert (cfg.head_dim, cfg.inner_dim) == (8, 24)


def test_unknown_preset_lists_known_ones() -> None:
    """preset() names the presets it knows."""
    with pytest.raises(KeyError, match="gpt2"):
        TransformerConfig.preset("gpt-5")


def test_dict_round_trip_and_unknown_fields() -> None:
    """to_dict/from_dict round-trip; an unknown key is named in the error."""
    cfg = TransformerConfig.preset("t5-small", dropout=0.0)
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.replace(n_layers=1).n_layers == 1 and cfg.n_layers == 6
    with pytest.raises(ValueError, match="n_layer"):
        TransformerConfig.from_dict({**cfg.to_dict(), "n_layer": 3})
