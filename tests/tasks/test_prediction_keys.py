"""Every task's predict rows use the platform's keys: `predicted` (+ `probabilities`) for labels, `generated` for text.

Each module is built from a DataSpec (no fit, no trainer) and runs its predict step on a batch its datamodule reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tasks.image_classification.data import ImageClassificationData
from tasks.image_classification.module import ImageClassification
from tasks.language_modeling.data import LanguageModelingData
from tasks.language_modeling.module import LanguageModeling
from tasks.seq2seq.data import Seq2SeqData
from tasks.seq2seq.module import Seq2Seq
from tasks.text_classification.data import TextClassificationData
from tasks.text_classification.module import TextClassification
from tasks.token_classification.data import TokenClassificationData
from tasks.token_classification.module import TokenClassification
from tests.data.quadrant_images import QUADRANTS, SIZE, write_folder
from tetraformer.core import TransformerConfig
from tetraformer.data import LabelVocabulary, train_tokenizer
from tetraformer.data.spec import DataSpec, ImageSpec
from tetraformer.training.base.datamodule import TaskDataModule
from tetraformer.training.base.module import TaskModule
from tetraformer.training.base.predictions import GENERATED, PREDICTED, PROBABILITIES
from tetraformer.training.base.text_generation import TextGenerationConfig

ARCH = TransformerConfig(d_model=32, n_heads=2, n_layers=1, d_ff=64, max_len=32, dropout=0.0)
SENTENCES = ["we met anna in oslo", "the match ended"]


def predict_rows(module: TaskModule, data: TaskDataModule, spec: DataSpec) -> list[dict[str, Any]]:
    """The rows the module's predict step makes of the first predict batch, both built from `spec`."""
    data.use_spec(spec)
    data.setup("predict")
    module.use_spec(spec)
    module.configure_model()
    module.eval()
    with torch.no_grad():
        return module.predict_step(next(iter(data.predict_dataloader())), 0)


@pytest.fixture
def tokenizer(tmp_path: Path) -> Any:
    """A character tokenizer of the fixture sentences."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return train_tokenizer([corpus], "char", 100, tmp_path / "tokenizer")


def text_spec(tokenizer: Any, **fields: Any) -> DataSpec:
    """A text task's spec on the fixture tokenizer."""
    return DataSpec.of(tokenizer, max_length=32, length_option="--data.max_length", **fields)


def test_label_tasks_name_the_prediction_predicted(tokenizer: Any, tmp_path: Path) -> None:
    """Text, image and token classification: `predicted` holds the label(s), never an input's own `label`/`tags`."""
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": s, "label": "gold"}) + "\n" for s in SENTENCES), encoding="utf-8")
    classes = LabelVocabulary(["sport", "travel"])
    text = predict_rows(
        TextClassification(arch=ARCH),
        TextClassificationData(predict_path=str(texts)),
        text_spec(tokenizer, labels=classes),
    )
    images = predict_rows(
        ImageClassification(arch=ARCH.replace(image_size=SIZE, patch_size=4)),
        ImageClassificationData(predict_path=str(write_folder(tmp_path / "images", 2, 0)), channels=1),
        DataSpec(labels=LabelVocabulary(list(QUADRANTS)), image=ImageSpec(SIZE, 1, (0.5,), (0.5,))),
    )
    lines = tmp_path / "sentences.txt"
    lines.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    tags = LabelVocabulary(["O", "B-PER", "I-PER"])
    tokens = predict_rows(
        TokenClassification(arch=ARCH),
        TokenClassificationData(predict_path=str(lines), format="text"),
        text_spec(tokenizer, labels=tags, extras={"scheme": "IOB2"}),
    )
    assert [r["label"] for r in text] == ["gold", "gold"] and all(r[PREDICTED] in classes.names for r in text)
    assert all(r[PREDICTED] == next(iter(r[PROBABILITIES])) for r in [*text, *images])
    assert len(images) == 2 and all(r[PREDICTED] in QUADRANTS for r in images) and "label" not in images[0]
    assert [len(r[PREDICTED]) for r in tokens] == [5, 3] and {t for r in tokens for t in r[PREDICTED]} <= {*tags.names}
    assert "tags" not in tokens[0]


def test_generating_tasks_name_their_text_generated(tokenizer: Any, tmp_path: Path) -> None:
    """Language modelling and seq2seq: the generated text is under `generated`, as `tetraformer generate` writes it."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    short = {"generation": TextGenerationConfig(max_new_tokens=2)}
    lm = predict_rows(
        LanguageModeling(arch=ARCH, **short),
        LanguageModelingData(predict_path=str(prompts), block_size=16),
        DataSpec.of(tokenizer, max_length=16, length_option="--data.block_size"),
    )
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"source": s}) + "\n" for s in SENTENCES), encoding="utf-8")
    seq2seq = predict_rows(
        Seq2Seq(arch=ARCH.replace(n_decoder_layers=1), **short),
        Seq2SeqData(predict_path=str(pairs)),
        text_spec(tokenizer),
    )
    assert [r["prompt"] for r in lm] == SENTENCES and all(isinstance(r[GENERATED], str) for r in lm)
    assert [r["source"] for r in seq2seq] == SENTENCES and all(isinstance(r[GENERATED], str) for r in seq2seq)
