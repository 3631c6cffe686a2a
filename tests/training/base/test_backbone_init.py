"""init_from into a network with a `backbone`: the backbone loads, the head stays fresh, both are said."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from tetraformer.core import MaskedLMHead, SequenceClassifier, TextEncoder, TransformerConfig, build_backbone
from tetraformer.payload import make_checkpoint, save_checkpoint
from tetraformer.training.checkpointing.loading import load_weights, source_tokenizer, starting_point

CFG = TransformerConfig(d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=50, max_len=16, type_vocab_size=2)


class PretrainingNet(nn.Module):
    """A task network with a reusable backbone and its own head (the shape of a masked-LM network)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone, self.cfg = TextEncoder(CFG), CFG
        self.head = MaskedLMHead(CFG)


def fresh_classifier() -> SequenceClassifier:
    """A classifier on a new encoder, seeded differently from the sources."""
    torch.manual_seed(1)
    return SequenceClassifier(build_backbone(CFG, "encoder"), 4)


@pytest.mark.parametrize("source", ["task network", "bare backbone"])
def test_backbone_loads_and_head_stays_fresh(source: str) -> None:
    """The backbone equals the source's; the head is untouched; the report names what was left out and is fresh."""
    torch.manual_seed(0)
    pretrained = PretrainingNet()
    state = pretrained.state_dict() if source == "task network" else pretrained.backbone.state_dict()
    net = fresh_classifier()
    head_before = {k: v.clone() for k, v in net.head.state_dict().items()}
    message = load_weights(net, state, "mlm.ckpt")
    for key, value in pretrained.backbone.state_dict().items():
        assert torch.equal(net.backbone.state_dict()[key], value), key
    assert all(torch.equal(net.head.state_dict()[k], v) for k, v in head_before.items())
    assert message.startswith("loaded the backbone")
    assert "head.classifier.weight" in message.split("starting fresh:")[1]
    assert ("head.proj.bias" in message) == (source == "task network")


def test_backbone_shape_mismatch_and_missing_tensors_are_errors() -> None:
    """A backbone of another width, or a source without the backbone's tensors, is a clear error."""
    wider = TextEncoder(CFG.replace(d_model=64, d_ff=128))
    with pytest.raises(ValueError, match=r"embed\.tokens\.weight' has shape \(50, 64\), model expects \(50, 32\)"):
        load_weights(fresh_classifier(), wider.state_dict(), "wide.ckpt")
    with pytest.raises(ValueError, match="missing weights for"):
        load_weights(fresh_classifier(), {"backbone.embed.tokens.weight": torch.zeros(50, 32)}, "part.ckpt")


def test_whole_network_still_loads_whole() -> None:
    """A source with every tensor of the network (classifier -> classifier) loads them all, head included."""
    source = fresh_classifier()
    torch.manual_seed(5)
    net = SequenceClassifier(build_backbone(CFG, "encoder"), 4)
    load_weights(net, source.state_dict(), "same.ckpt")
    assert all(torch.equal(net.state_dict()[k], v) for k, v in source.state_dict().items())


def test_checkpoint_of_a_task_network_is_a_starting_point_with_its_tokenizer(tmp_path: Path) -> None:
    """A Tetraformer checkpoint gives its config, `backbone.*` weights and stored tokenizer (None without one)."""
    path = save_checkpoint(make_checkpoint(PretrainingNet(), None, None), tmp_path / "mlm.ckpt")
    cfg, state = starting_point(path)
    assert cfg == CFG and any(k.startswith("backbone.") for k in state)
    assert source_tokenizer(path) is None
