"""init_from runs each module's `adapt_source_state` hook before its shape checks: a ViT checkpoint at another size."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from tetraformer.core import ImageEncoder, SequenceClassifier, TransformerConfig
from tetraformer.payload import make_checkpoint, save_checkpoint
from tetraformer.training.checkpointing.loading import load_weights, starting_point

VIT = TransformerConfig.preset(
    "vit-b/16", d_model=32, n_heads=4, n_layers=2, d_ff=64, image_size=16, patch_size=4, init_std=0.2
)


@pytest.mark.parametrize("saved", ["classifier", "bare backbone"])
def test_vit_checkpoint_at_another_image_size_loads_and_logs(
    tmp_path: Path, saved: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A 16-pixel checkpoint starts a 32-pixel classifier that gives its logits on 32-pixel images (whose
    positions the source interpolates at every forward); the resize is logged once, naming both grids."""
    torch.manual_seed(0)
    source = SequenceClassifier(ImageEncoder(VIT), 4).eval()
    ckpt = save_checkpoint(
        make_checkpoint(source if saved == "classifier" else source.backbone, None, None), tmp_path / "small.ckpt"
    )
    cfg, state = starting_point(ckpt)
    net = SequenceClassifier(ImageEncoder(cfg.replace(image_size=32)), 4)
    with caplog.at_level(logging.INFO, logger="tetraformer.training.checkpointing.loading"):
        load_weights(net, state, str(ckpt))
    resized = [m for m in caplog.messages if "positions resized" in m]
    assert resized == [
        f"{ckpt}: {'backbone.' if saved == 'classifier' else ''}embed: positions resized from 4x4 to 8x8 patches"
    ]
    assert net.backbone.embed.positions.weight.shape == (1 + 8 * 8, 32)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(net.backbone.eval()(x).last_hidden_state, source.backbone(x).last_hidden_state)
        if saved == "classifier":
            torch.testing.assert_close(net.eval()(x), source(x))


class Doubling(nn.Module):
    """A module whose hook doubles its source tensor: shows where and with which prefix hooks run."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(2))

    def adapt_source_state(self, state: dict[str, Tensor], prefix: str) -> list[str]:
        """Double `{prefix}weight` in the source."""
        state[prefix + "weight"] = 2 * state[prefix + "weight"]
        return ["doubled"]


def test_hooks_run_at_their_prefix_on_a_copy_of_the_source(caplog: pytest.LogCaptureFixture) -> None:
    """Every module's hook runs with its own key prefix; the caller's state dict is left as it was."""
    net = nn.Sequential(Doubling(), nn.Sequential(Doubling()))
    state = {"0.weight": torch.ones(2), "1.0.weight": torch.full((2,), 3.0)}
    with caplog.at_level(logging.INFO, logger="tetraformer.training.checkpointing.loading"):
        load_weights(net, state, "x.ckpt")
    assert torch.equal(net[0].weight, torch.full((2,), 2.0)) and torch.equal(net[1][0].weight, torch.full((2,), 6.0))
    assert torch.equal(state["0.weight"], torch.ones(2))
    assert caplog.messages == ["x.ckpt: 0: doubled", "x.ckpt: 1.0: doubled"]
