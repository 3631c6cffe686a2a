"""--model.ensemble: K classifiers from their own initial weights, each trained on its own loss over the same
batches, read from the mean of their log-probabilities (multi-label: of their label probabilities); refused beside
options that load or adapt one network."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tasks.text_classification.module import TextClassification
from tests.cli_runner import last_metrics
from tests.tasks.text_classification.conftest import labelled_rows, multi_label_rows, write_csv, write_jsonl
from tetraformer.core.ensemble import Ensemble
from tetraformer.errors import ConfigError
from tetraformer.training.checkpointing.loading import load_task_module

SPLITS = (("train", 240, 0), ("val", 60, 1))  # the fixture's training and validation rows: name, count, seed


def batch(module: TextClassification, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """Four rows of 7 random ids (the last two padded after 4), with the given labels."""
    generator = torch.Generator().manual_seed(0)
    vocab = module.net.members[0].backbone.embed.tokens.num_embeddings
    mask = torch.tensor([[1] * 7, [1] * 7, [1] * 4 + [0] * 3, [1] * 4 + [0] * 3])
    return {
        "input_ids": torch.randint(1, vocab, (4, 7), generator=generator),
        "attention_mask": mask,
        "token_type_ids": torch.zeros(4, 7, dtype=torch.long),
        "labels": labels,
    }


def members_alone(module: TextClassification, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Each member's (B, C) logits, run on its own."""
    kw = {"attention_mask": inputs["attention_mask"], "token_type_ids": inputs["token_type_ids"]}
    return [member(inputs["input_ids"], **kw) for member in module.net.members]


def fit_ensemble(run_cli: Callable[..., Path], tmp_path: Path, multi_label: bool, *args: str) -> Path:
    """A fit of two classifiers on the keyword fixture (its multi-label rows with `multi_label`); its run dir."""
    if multi_label:
        train, val = (write_jsonl(tmp_path / f"{n}.jsonl", multi_label_rows(k, s)) for n, k, s in SPLITS)
        data = {"label_field": "labels", "multi_label": True}
    else:
        train, val = (write_csv(tmp_path / f"{n}.csv", labelled_rows(k, s)) for n, k, s in SPLITS)
        data = {}
    return run_cli("fit", *args, model={"ensemble": 2}, train_path=str(train), val_path=str(val), **data)


def assert_pools_log_probabilities(run: Path) -> None:
    """The run's checkpoint holds two classifiers from their own initial weights; the loss is the mean of their
    losses and the scores the metrics and predictions see are the mean of their log-probabilities."""
    module = load_task_module(run / "checkpoints" / "last.ckpt")
    assert isinstance(module.net, Ensemble) and len(module.net.members) == 2
    first, second = (m.backbone.embed.tokens.weight for m in module.net.members)
    assert not torch.allclose(first, second)  # each member from its own initial weights, trained apart
    labels = torch.tensor([0, 1, 2, 0])
    inputs = batch(module, labels)
    with torch.no_grad():
        alone = members_alone(module, inputs)
        out = module.compute(inputs, "val")
    expected = torch.stack([logits.log_softmax(-1) for logits in alone]).mean(0)
    torch.testing.assert_close(out["preds"], expected)
    losses = [module.cross_entropy(logits, labels) for logits in alone]
    torch.testing.assert_close(out["loss"], torch.stack(losses).mean())


def assert_pools_probabilities(run: Path) -> None:
    """Multi-label: a label's probability is the mean of the members' probabilities."""
    module = load_task_module(run / "checkpoints" / "last.ckpt")
    inputs = batch(module, torch.tensor([[1, 0, 0], [0, 1, 1], [1, 1, 0], [0, 0, 1]]))
    with torch.no_grad():
        alone = members_alone(module, inputs)
        out = module.compute(inputs, "val")
    torch.testing.assert_close(out["preds"], torch.stack([logits.sigmoid() for logits in alone]).mean(0))


@pytest.mark.parametrize("multi_label", [False, True])
def test_an_ensemble_pools_its_members(run_cli: Callable[..., Path], tmp_path: Path, multi_label: bool) -> None:
    """After two steps, the ensemble's scores pool its members: log-probabilities, or label probabilities."""
    run = fit_ensemble(run_cli, tmp_path, multi_label, "--trainer.max_steps", "2")
    (assert_pools_probabilities if multi_label else assert_pools_log_probabilities)(run)


@pytest.mark.learning
def test_an_ensemble_learns_and_pools_its_members(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """Two classifiers from their own weights learn the keyword fixture, pooling their log-probabilities."""
    run = fit_ensemble(run_cli, tmp_path, multi_label=False)
    metrics = last_metrics(run)
    assert metrics["val/acc"] > 0.8 and metrics["val/f1_macro"] > 0.75, metrics
    assert_pools_log_probabilities(run)


@pytest.mark.learning
def test_a_multi_label_ensemble_pools_probabilities(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """Multi-label: the ensemble learns, and a label's probability is the mean of the members' probabilities."""
    run = fit_ensemble(run_cli, tmp_path, multi_label=True)
    metrics = last_metrics(run)
    assert metrics["val/f1_micro"] > 0.8, metrics
    assert_pools_probabilities(run)


@pytest.mark.parametrize("clash", [{"init_from": "base.ckpt"}, {"lora": {"rank": 4, "save": "merged"}}])
def test_an_ensemble_refuses_options_that_load_or_adapt_one_network(clash: dict) -> None:
    with pytest.raises(ConfigError, match=f"--model.ensemble 2 trains classifiers .*--model.{next(iter(clash))}"):
        TextClassification(ensemble=2, **clash)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="--model.ensemble"):
            TextClassification(ensemble=bad)
