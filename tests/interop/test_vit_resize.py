"""init_from a HF ViT directory at another image size: the model equals transformers' interpolate_pos_encoding."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import torch
import transformers

from tests.interop.test_vit import make_hf, max_diff, pixels
from tetraformer.core import ImageEncoder, SequenceClassifier
from tetraformer.interop.convert import export_network
from tetraformer.training.checkpointing.loading import load_weights, starting_point

TOL = 1e-4


@torch.no_grad()
@pytest.mark.parametrize("size", [48, 16, 40])
def test_hf_classifier_at_another_size_equals_transformers_interpolation(
    tmp_path: Path, size: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A 32-pixel HF classifier loaded at `size`: logits equal HF's with interpolate_pos_encoding=True; logged."""
    hf = make_hf(tmp_path, "base-gelu-qkv-bias")  # 8-pixel patches: a 4x4 grid
    cfg, state = starting_point(tmp_path)
    net = SequenceClassifier(ImageEncoder(cfg.replace(image_size=size)), 5, pooling="cls")
    with caplog.at_level(logging.INFO, logger="tetraformer.training.checkpointing.loading"):
        load_weights(net, state, str(tmp_path))
    g = size // 8
    assert f"{tmp_path}: backbone.embed: positions resized from 4x4 to {g}x{g} patches" in caplog.messages
    x = pixels(hf, size)
    assert max_diff(net.eval()(x), hf(pixel_values=x, interpolate_pos_encoding=True).logits) < TOL


@torch.no_grad()
def test_hf_backbone_into_a_fresh_classifier_at_another_size(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A HF ViTModel as the backbone of a new classifier at 48 pixels: its states equal HF's interpolated ones."""
    hf = make_hf(tmp_path, "img24-patch4-1ch-no-qkv-bias-gelu-new", transformers.ViTModel)  # 6x6 grid
    cfg, state = starting_point(tmp_path)
    net = SequenceClassifier(ImageEncoder(cfg.replace(image_size=48)), 3, pooling="cls")
    with caplog.at_level(logging.INFO, logger="tetraformer.training.checkpointing.loading"):
        load_weights(net, state, str(tmp_path))
    assert f"{tmp_path}: embed: positions resized from 6x6 to 12x12 patches" in caplog.messages
    x = pixels(hf, 48)
    theirs = hf(pixel_values=x, interpolate_pos_encoding=True).last_hidden_state
    assert max_diff(net.backbone.eval()(x).last_hidden_state, theirs) < TOL


@torch.no_grad()
def test_rgb_hf_backbone_serves_grayscale_images(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An RGB HF ViT loaded at 1 channel and 48 pixels: a gray image gives HF's states for it replicated to RGB."""
    hf = make_hf(tmp_path, "base-gelu-qkv-bias", transformers.ViTModel)
    cfg, state = starting_point(tmp_path)
    net = ImageEncoder(cfg.replace(image_size=48, n_channels=1))
    with caplog.at_level(logging.INFO, logger="tetraformer.training.checkpointing.loading"):
        load_weights(net, state, str(tmp_path))
    assert f"{tmp_path}: embed: patch projection converted from 3 to 1 channels" in caplog.messages
    gray = torch.randn(2, 1, 48, 48)
    theirs = hf(pixel_values=gray.expand(-1, 3, -1, -1), interpolate_pos_encoding=True).last_hidden_state
    assert max_diff(net.eval()(gray).last_hidden_state, theirs) < TOL


def test_another_patch_size_is_refused_naming_the_source(tmp_path: Path) -> None:
    """A model with 4-pixel patches cannot start from 8-pixel ones: the error names the source and the fix."""
    make_hf(tmp_path, "base-gelu-qkv-bias", transformers.ViTModel)
    cfg, state = starting_point(tmp_path)
    with pytest.raises(
        ValueError, match=rf"{re.escape(str(tmp_path))}: the source's patches are 8x8 pixels, this model's 4x4"
    ):
        load_weights(ImageEncoder(cfg.replace(patch_size=4)), state, str(tmp_path))


@torch.no_grad()
def test_resized_classifier_exports_at_its_new_size(tmp_path: Path) -> None:
    """Loaded at 48 pixels, to-hf writes image_size 48: transformers gives our logits without interpolating."""
    hf = make_hf(tmp_path / "hf", "base-gelu-qkv-bias")
    cfg, state = starting_point(tmp_path / "hf")
    net = SequenceClassifier(ImageEncoder(cfg.replace(image_size=48)), 5, pooling="cls")
    load_weights(net, state, "hf")
    exported = transformers.ViTForImageClassification.from_pretrained(
        export_network(net, None, tmp_path / "out", labels=list(hf.config.id2label.values()))
    ).eval()
    assert exported.config.image_size == 48 and exported.config.id2label == hf.config.id2label
    x = pixels(hf, 48)
    assert max_diff(exported(pixel_values=x).logits, net.eval()(x)) < TOL
    assert max_diff(exported(pixel_values=x).logits, hf(pixel_values=x, interpolate_pos_encoding=True).logits) < TOL
