"""DataSpec: a module builds its network from it without a trainer, and a checkpoint gives it back equal."""

from __future__ import annotations

from pathlib import Path

import lightning
import pytest
import torch

from tasks.image_classification.module import ImageClassification
from tasks.text_classification.module import TextClassification
from tetraformer.core import TransformerConfig
from tetraformer.data import LabelVocabulary, train_tokenizer
from tetraformer.data.spec import DataSpec, ImageSpec, TrainingBatches
from tetraformer.payload import PAYLOAD_KEY, save_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module

ARCH = TransformerConfig(d_model=32, n_heads=2, n_layers=1, d_ff=64, max_len=16, dropout=0.0)


@pytest.fixture
def text_spec(tmp_path: Path) -> DataSpec:
    """A character tokenizer, rows of at most 24 tokens, three labels and a task extra."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\na dog ran far away\n", encoding="utf-8")
    tokenizer = train_tokenizer([corpus], "char", 100, tmp_path / "tokenizer")
    labels = LabelVocabulary(["cat", "dog", "emu"])
    return DataSpec.of(tokenizer, max_length=24, length_option="--data.max_length", labels=labels, extras={"k": 1})


def image_spec() -> DataSpec:
    """Two labels of 16-pixel grayscale images with their normalisation."""
    return DataSpec(labels=LabelVocabulary(["top", "bottom"]), image=ImageSpec(16, 1, (0.25,), (0.5,)))


def saved(module: torch.nn.Module, path: Path) -> Path:
    """The module's checkpoint as Lightning writes it (state dict, then the module's payload)."""
    checkpoint = {"state_dict": module.state_dict(), "pytorch-lightning_version": lightning.__version__}
    module.on_save_checkpoint(checkpoint)
    return save_checkpoint(checkpoint, path)


def test_a_module_builds_from_a_spec_without_a_trainer(text_spec: DataSpec) -> None:
    """Vocabulary size, position table and outputs come from the spec; no trainer or datamodule is involved."""
    module = TextClassification(arch=ARCH)
    module.use_spec(text_spec)
    module.configure_model()
    assert module._trainer is None
    assert module.net.cfg.vocab_size == len(text_spec.tokenizer) == text_spec.vocab_size
    assert module.net.cfg.max_len == 24 and module.vocabulary.names == ["cat", "dog", "emu"]
    assert module.net(torch.tensor([[1, 2, 3]])).shape == (1, 3)
    assert text_spec.special_ids["pad"] == text_spec.tokenizer.pad_token_id


def test_the_spec_round_trips_through_a_checkpoint(text_spec: DataSpec, tmp_path: Path) -> None:
    """The loaded module's spec equals the saved one, tokenizer included; the payload keeps it as plain data."""
    module = TextClassification(arch=ARCH)
    module.use_spec(text_spec)
    module.configure_model()
    path = saved(module, tmp_path / "text.ckpt")
    loaded = load_task_module(path)
    assert loaded.spec == text_spec
    assert loaded.spec.tokenizer.backend_tokenizer.to_str() == text_spec.tokenizer.backend_tokenizer.to_str()
    assert torch.load(path, weights_only=True)[PAYLOAD_KEY]["data_spec"]["labels"]["labels"] == ["cat", "dog", "emu"]


def test_an_image_spec_round_trips_with_its_normalisation(tmp_path: Path) -> None:
    """Image size, channels, mean and std come back, and the network is built at that size."""
    module = ImageClassification(arch=ARCH.replace(image_size=32, patch_size=4))
    module.use_spec(image_spec())
    module.configure_model()
    assert (module.net.cfg.image_size, module.net.cfg.n_channels) == (16, 1)
    loaded = load_task_module(saved(module, tmp_path / "image.ckpt"))
    assert loaded.spec == image_spec() and loaded.normalization.mean == [0.25]


def test_the_runs_batching_is_handed_over_but_never_stored(text_spec: DataSpec, tmp_path: Path) -> None:
    """`training` (batch size, an epoch's tokens) is this run's: equal specs may differ in it, and a checkpoint
    neither keeps it nor lets it change the spec that comes back."""
    spec = DataSpec.of(text_spec.tokenizer, max_length=24, labels=text_spec.labels, training=TrainingBatches(32, 4_096))
    assert spec == DataSpec.of(text_spec.tokenizer, max_length=24, labels=text_spec.labels)
    assert "training" not in spec.state()
    module = TextClassification(arch=ARCH)
    module.use_spec(spec)
    module.configure_model()
    assert load_task_module(saved(module, tmp_path / "text.ckpt")).spec.training is None
