"""Token classification from a saved DatasetDict whose tags are a Sequence(ClassLabel)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from tests.tasks.token_classification.conftest import tagged_sentences
from tetraformer.training.checkpointing.loading import load_task_module

TAGS = ClassLabel(names=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])  # the dataset's order, not the scheme's sorted one


def tagged(n: int, seed: int) -> Dataset:
    """The tagging fixture with words and tag ids in columns, as Hugging Face NER datasets hold them."""
    sentences = tagged_sentences(n, seed)
    features = Features({"words": Sequence(Value("string")), "ner_tags": Sequence(TAGS)})
    data = {
        "words": [[w for w, _ in s] for s in sentences],
        "ner_tags": [[TAGS.str2int(t) for _, t in s] for s in sentences],
    }
    return Dataset.from_dict(data, features)


@pytest.mark.slow
def test_fit_from_a_saved_dataset_dict(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """train_path and val_path name one folder: its train and validation splits; tags are read by name."""
    saved = tmp_path / "ner"
    DatasetDict({"train": tagged(60, 0), "validation": tagged(20, 1)}).save_to_disk(str(saved))
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "3",
        train_path=str(saved),
        val_path=str(saved),
        tokens_field="words",
        tags_field="ner_tags",
    )
    assert load_task_module(run / "checkpoints" / "last.ckpt").vocabulary.names == TAGS.names
