"""An image classifier (SequenceClassifier on an ImageEncoder) exports as ViTForImageClassification with its labels."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import transformers
from torch import nn

from tests.interop.test_vit import make_hf, max_diff, pixels
from tetraformer.cli.commands import convert_command
from tetraformer.core import ImageEncoder, SequenceClassifier, TextDecoder, TransformerConfig
from tetraformer.interop import InteropError
from tetraformer.interop.convert import export_network
from tetraformer.training.checkpointing.loading import load_weights, starting_point

TOL = 1e-4
NAMES = ["ant", "bee", "cow", "doe", "elk"]
SCRATCH = TransformerConfig.preset(
    "vit-b/16",
    d_model=32,
    n_heads=4,
    n_layers=2,
    d_ff=64,
    image_size=24,
    patch_size=4,
    n_channels=1,
    init_std=0.2,
)


def fine_tune(net: nn.Module, steps: int = 3) -> nn.Module:
    """A few AdamW steps on random images and labels, so every exported tensor differs from where it started."""
    torch.manual_seed(0)
    cfg = net.backbone.cfg
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    net.train()
    for _ in range(steps):
        x = torch.randn(4, cfg.n_channels, cfg.image_size, cfg.image_size)
        y = torch.randint(0, net.head.classifier.out_features, (4,))
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


def from_hf(path: Path) -> SequenceClassifier:
    """The classifier `--model.init_from HF_DIR` builds: the source's config and weights, loaded as init_from does."""
    cfg, state = starting_point(path)
    net = SequenceClassifier(ImageEncoder(cfg), len(NAMES), pooling="cls")
    load_weights(net, state, str(path))
    return net.eval()


@torch.no_grad()
def test_imported_hf_classifier_gives_its_logits(tmp_path: Path) -> None:
    """init_from a HF ViTForImageClassification directory: our classifier's logits are transformers'."""
    hf = make_hf(tmp_path / "hf", "base-gelu-qkv-bias")
    x = pixels(hf)
    assert max_diff(from_hf(tmp_path / "hf")(x), hf(pixel_values=x).logits) < TOL


@pytest.mark.parametrize("start", ["hf classifier", "from scratch, 1 channel"])
def test_fine_tuned_classifier_exports_and_transformers_gives_our_logits(tmp_path: Path, start: str) -> None:
    """After training steps, to-hf writes a ViTForImageClassification transformers loads whole, with our logits
    and our label names."""
    if start == "hf classifier":
        original = make_hf(tmp_path / "hf", "base-gelu-qkv-bias")
        net = from_hf(tmp_path / "hf")
    else:
        original, net = None, SequenceClassifier(ImageEncoder(SCRATCH), len(NAMES), pooling="cls")
    before = {k: v.clone() for k, v in net.state_dict().items()}
    fine_tune(net)
    assert all(not torch.equal(v, before[k]) for k, v in net.state_dict().items())
    out = export_network(net, None, tmp_path / "out", labels=NAMES)
    hf, info = transformers.AutoModelForImageClassification.from_pretrained(out, output_loading_info=True)
    assert type(hf) is transformers.ViTForImageClassification and not any(info.values()), info
    assert hf.config.id2label == dict(enumerate(NAMES)) and hf.config.label2id == {n: i for i, n in enumerate(NAMES)}
    x = pixels(hf.eval())
    with torch.no_grad():
        ours, theirs = net(x), hf(pixel_values=x).logits
        assert max_diff(theirs, ours) < TOL
        if original is not None:  # the export carries the fine-tuned weights, not the imported ones
            assert max_diff(theirs, original(pixel_values=x).logits) > 1e-2


@pytest.mark.parametrize(
    ("net", "message"),
    [
        (
            lambda: SequenceClassifier(ImageEncoder(SCRATCH), 3, pooling="mean"),
            r"classifies the final \[CLS\] state directly .* pooling='mean', pooler=False",
        ),
        (lambda: SequenceClassifier(ImageEncoder(SCRATCH), 3, pooler=True), r"pooling='cls', pooler=True"),
        (
            lambda: SequenceClassifier(ImageEncoder(SCRATCH.replace(position="sinusoidal")), 3),
            r"cannot export as ViT: .*'position': 'sinusoidal'",
        ),
        (
            lambda: SequenceClassifier(TextDecoder(TransformerConfig.preset("tiny", vocab_size=50)), 3),
            r"no Hugging Face export for this SequenceClassifier on TextDecoder network \(exportable: .*"
            r"SequenceClassifier on ImageEncoder",
        ),
    ],
    ids=["mean pooling", "tanh pooler", "sinusoidal positions", "decoder backbone"],
)
def test_classifiers_hf_cannot_express_are_refused(tmp_path: Path, net: type, message: str) -> None:
    """What ViTForImageClassification (or any HF class) cannot run is a named error, not a wrong model."""
    with pytest.raises(InteropError, match=message):
        export_network(net(), None, tmp_path / "out", labels=["a", "b", "c"])


def test_from_hf_of_a_vit_asks_for_no_tokenizer_and_starts_a_network(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`convert from-hf` of a ViT classifier: no tokenizer advice (images need none); the .ckpt starts a network."""
    hf = make_hf(tmp_path / "hf", "base-gelu-qkv-bias")
    with caplog.at_level(logging.INFO):
        convert_command(["from-hf", str(tmp_path / "hf"), str(tmp_path / "vit.ckpt")])
    assert "tokenizer" not in caplog.text
    cfg, state = starting_point(tmp_path / "vit.ckpt")
    net = SequenceClassifier(ImageEncoder(cfg), len(NAMES), pooling="cls")
    load_weights(net, state, "vit.ckpt")
    x = pixels(hf)
    with torch.no_grad():
        assert max_diff(net.eval()(x), hf(pixel_values=x).logits) < TOL
