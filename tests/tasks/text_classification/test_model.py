"""build_classifier: each backbone kind with the poolings that fit it; the others are clear errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tasks.text_classification.model import POOLINGS_BY_BACKBONE, build_classifier
from tetraformer.core import TransformerConfig

CFG = TransformerConfig(d_model=32, n_heads=2, n_layers=1, d_ff=64, vocab_size=40, max_len=16)


@pytest.mark.parametrize(("backbone", "pooling"), [(b, p) for b, ps in POOLINGS_BY_BACKBONE.items() for p in ps])
def test_fitting_poolings_give_logits(backbone: str, pooling: str) -> None:
    """(B, T) ids -> (B, C) logits for every allowed pairing."""
    net = build_classifier(CFG, backbone, 5, pooling, pooler=True)
    ids = torch.randint(1, 40, (3, 7))
    assert net(ids, attention_mask=torch.ones(3, 7, dtype=torch.bool)).shape == (3, 5)


@pytest.mark.parametrize(("backbone", "pooling"), [("decoder", "cls"), ("encoder", "decoder"), ("decoder", "decoder")])
def test_unfitting_poolings_are_refused(backbone: str, pooling: str) -> None:
    """cls on a causal decoder, a decoder step without a decoder: the error names the choices."""
    with pytest.raises(ValueError, match=f"pooling='{pooling}': does not fit a {backbone} backbone; use one of: "):
        build_classifier(CFG, backbone, 5, pooling, pooler=False)


def test_unfitting_pooling_is_one_line_from_the_cli(
    run_cli: Callable[..., Path], splits: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`fit --model.backbone decoder --model.pooling cls` stops with exit code 2 and one `error:` line."""
    with pytest.raises(SystemExit) as stop:
        run_cli("fit", model={"backbone": "decoder", "pooling": "cls"}, train_path=str(splits["train"]))
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: --model.pooling 'cls': does not fit")
