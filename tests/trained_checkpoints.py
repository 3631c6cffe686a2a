"""Tiny trained checkpoints of each family, made by 3-step CLI fits: a module-scoped fixture returns the factory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tasks.language_modeling import conftest as lm
from tests.tasks.masked_lm import conftest as mlm
from tests.tasks.seq2seq import conftest as s2s
from tests.tasks.text_classification import conftest as tc
from tests.tasks.token_classification import conftest as ner
from tests.training.image_task import train_image_task
from tetraformer.cli import main


def text_classification(root: Path, backbone: str) -> dict[str, Any]:
    """A keyword classifier config on an encoder or decoder backbone."""
    train = tc.write_csv(root / "train.csv", tc.labelled_rows(60, 0))
    val = tc.write_csv(root / "val.csv", tc.labelled_rows(20, 1))
    return tc.tiny_config(root / "run", model={"backbone": backbone}, train_path=str(train), val_path=str(val))


def token_classification(root: Path) -> dict[str, Any]:
    """A tagger config on the names-and-cities fixture."""
    train = ner.write_conll(root / "train.conll", ner.tagged_sentences(60, 0))
    val = ner.write_conll(root / "val.conll", ner.tagged_sentences(20, 1))
    return ner.tiny_config(root / "run", train_path=str(train), val_path=str(val))


def masked_lm(root: Path) -> dict[str, Any]:
    """A tiny BERT config on the topic corpus."""
    corpus = root / "corpus.txt"
    corpus.write_text(mlm.topic_corpus(60), encoding="utf-8")
    return mlm.tiny_config(root / "run", train_path=str(corpus))


def language_model(root: Path) -> dict[str, Any]:
    """A char-level GPT config on the line corpus."""
    corpus = root / "corpus.txt"
    corpus.write_text(lm.TEXT * 12, encoding="utf-8")
    return lm.tiny_config(root / "run", train_path=str(corpus), documents="line")


def seq2seq(root: Path) -> dict[str, Any]:
    """A char-level T5 config on reversal pairs."""
    pairs = s2s.write_jsonl(root / "pairs.jsonl", s2s.reversal_pairs(100))
    return s2s.tiny_config(root / "run", train_path=str(pairs))


TEXT_FAMILIES: dict[str, Callable[[Path], dict[str, Any]]] = {
    "classifier_encoder": lambda root: text_classification(root, "encoder"),
    "classifier_decoder": lambda root: text_classification(root, "decoder"),
    "token_classifier": token_classification,
    "masked_lm": masked_lm,
    "language_model": language_model,
    "seq2seq": seq2seq,
}


def checkpoint_factory(tmp_path_factory: pytest.TempPathFactory, *fit_args: str) -> Callable[[str], Path]:
    """`make(family)`: the last.ckpt of a 3-step run of one family (a text family's run is ROOT/run, its config
    ROOT/fit.yaml; `fit_args` added to a text family's fit), trained the first time it is asked for. Tests that use
    it run a fit: mark them slow."""
    trained: dict[str, Path] = {}

    def make(family: str) -> Path:
        if family not in trained:
            root = tmp_path_factory.mktemp(family)
            if family == "image":
                trained[family] = train_image_task(root, steps=2)
            else:
                config = root / "fit.yaml"
                config.write_text(yaml.safe_dump(TEXT_FAMILIES[family](root)))
                main(["fit", "-c", str(config), "--trainer.max_steps", "3", *fit_args])
                trained[family] = root / "run" / "checkpoints" / "last.ckpt"
        return trained[family]

    return make
