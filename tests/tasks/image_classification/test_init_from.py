"""init_from a tiny random Hugging Face ViT at another image size and channel count (as the module builds it, then a
fine-tune through the CLI); top-5."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import transformers

from tasks.image_classification.module import ImageClassification
from tests.cli_runner import last_metrics
from tests.data.quadrant_images import QUADRANTS
from tetraformer.core import resize_position_grid
from tetraformer.data import LabelVocabulary
from tetraformer.data.spec import DataSpec, ImageSpec
from tetraformer.training.checkpointing.loading import load_task_module


def hf_vit(out: Path, num_labels: int) -> Path:
    """A random 3-channel ViTForImageClassification at 32 pixels (8x8 patches of 4 pixels), saved to `out`."""
    config = transformers.ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=32,
        patch_size=4,
        num_channels=3,
        num_labels=num_labels,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    transformers.ViTForImageClassification(config).save_pretrained(out)
    return out


def test_init_from_hf_vit_at_another_size(tmp_path: Path) -> None:
    """16-pixel gray data from a 32-pixel RGB ViT with 7 labels: positions resized, projection summed to 1
    channel, a new 4-class head; the encoder is HF's."""
    source = hf_vit(tmp_path / "hf", num_labels=7)
    hf = transformers.ViTForImageClassification.from_pretrained(source)
    module = ImageClassification(init_from=str(source))
    module.use_spec(DataSpec(labels=LabelVocabulary(list(QUADRANTS)), image=ImageSpec(16, 1, (0.5,), (0.5,))))
    module.configure_model()
    net = module.net
    assert net.cfg.image_size == 16 and net.cfg.n_channels == 1 and net.head.classifier.out_features == 4
    theirs = hf.vit.embeddings
    assert torch.allclose(
        net.backbone.embed.proj.weight, theirs.patch_embeddings.projection.weight.sum(1, keepdim=True)
    )
    assert torch.allclose(
        net.backbone.embed.positions.weight, resize_position_grid(theirs.position_embeddings[0], (4, 4))
    )
    for ours, layer in zip(net.backbone.encoder.layers, hf.vit.layers, strict=True):  # transformers 5 names
        assert torch.equal(ours.ffn.up.weight, layer.mlp.fc1.weight)
        assert torch.equal(ours.ffn.down.weight, layer.mlp.fc2.weight)


def test_fine_tune_from_hf_vit_at_another_size(
    run_cli: Callable[..., Path], folders: dict[str, Path], tmp_path: Path
) -> None:
    """Through the CLI, the data's size and channels and its 4 classes shape the network init_from builds; 5 steps
    fine-tune HF's encoder."""
    source = hf_vit(tmp_path / "hf", num_labels=7)
    hf = transformers.ViTForImageClassification.from_pretrained(source)
    tuned = run_cli(
        "fit",
        "--model.init_from",
        str(source),
        "--trainer.max_steps",
        "5",
        "--trainer.limit_val_batches",
        "0",
        train_path=str(folders["train"]),
        val_path=str(folders["val"]),
    )
    tuned_net = load_task_module(tuned / "checkpoints" / "last.ckpt").net
    cfg = tuned_net.cfg
    assert cfg.image_size == 16 and cfg.n_channels == 1 and tuned_net.head.classifier.out_features == 4
    assert not torch.equal(tuned_net.backbone.encoder.layers[0].ffn.up.weight, hf.vit.layers[0].mlp.fc1.weight)
    assert np.isfinite(last_metrics(tuned, "train")["train/loss"])


def test_top5_accuracy_with_more_than_five_classes(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """8 classes (which of 8 cells is bright) from an npz: top-5 is reported and is at least top-1."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 60, size=(160, 16, 16), dtype=np.uint8)
    y = np.arange(160) % 8
    for i, cls in enumerate(y):
        row, col = divmod(int(cls), 4)
        x[i, row * 8 : row * 8 + 8, col * 4 : col * 4 + 4] += 150
    np.savez(tmp_path / "cells.npz", x=x, y=y)
    one_epoch = ["--trainer.max_epochs", "1", "--trainer.limit_train_batches", "2"]  # validated at its end
    cells = str(tmp_path / "cells.npz")
    run = run_cli("fit", *one_epoch, "--trainer.num_sanity_val_steps", "0", train_path=cells, val_fraction=0.25)
    metrics = last_metrics(run)
    assert metrics["val/top5_acc"] >= metrics["val/acc"]


def test_top5_counts_the_target_among_the_five_best() -> None:
    """Of 8 classes: a target ranked 5th counts for top-5 but not top-1; one ranked 6th counts for neither."""
    module = ImageClassification()
    module.use_spec(
        DataSpec(labels=LabelVocabulary([str(i) for i in range(8)]), image=ImageSpec(16, 1, (0.5,), (0.5,)))
    )
    metrics = module.make_metrics()
    logits = torch.arange(8.0).repeat(2, 1)  # class 7 is the best, class 3 the 5th, class 2 the 6th
    metrics["top5_acc"].update(logits, torch.tensor([3, 2]))
    metrics["acc"].update(logits, torch.tensor([3, 2]))
    assert float(metrics["top5_acc"].compute()) == 0.5 and float(metrics["acc"].compute()) == 0.0
