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
from tests.tasks.text_classification.conftest import multi_label_rows, write_jsonl
from tetraformer.core.ensemble import Ensemble
from tetraformer.errors import ConfigError
from tetraformer.training.checkpointing.loading import load_task_module


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


@pytest.mark.learning
def test_an_ensemble_learns_and_pools_its_members(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path
) -> None:
    """Two classifiers from their own weights learn the keyword fixture; the loss is the mean of their losses and
    the scores the metrics and predictions see are the mean of their log-probabilities."""
    run = run_cli(
        "fit",
        model={"ensemble": 2},
        train_path=str(splits["train"]),
        val_path=str(splits["val"]),
    )
    metrics = last_metrics(run)
    assert metrics["val/acc"] > 0.8 and metrics["val/f1_macro"] > 0.75, metrics
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


@pytest.mark.learning
def test_a_multi_label_ensemble_pools_probabilities(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """Multi-label: the ensemble learns, and a label's probability is the mean of the members' probabilities."""
    run = run_cli(
        "fit",
        model={"ensemble": 2},
        train_path=str(write_jsonl(tmp_path / "train.jsonl", multi_label_rows(240, 0))),
        val_path=str(write_jsonl(tmp_path / "val.jsonl", multi_label_rows(60, 1))),
        label_field="labels",
        multi_label=True,
    )
    metrics = last_metrics(run)
    assert metrics["val/f1_micro"] > 0.8, metrics
    module = load_task_module(run / "checkpoints" / "last.ckpt")
    inputs = batch(module, torch.tensor([[1, 0, 0], [0, 1, 1], [1, 1, 0], [0, 0, 1]]))
    with torch.no_grad():
        alone = members_alone(module, inputs)
        out = module.compute(inputs, "val")
    torch.testing.assert_close(out["preds"], torch.stack([logits.sigmoid() for logits in alone]).mean(0))


@pytest.mark.parametrize("clash", [{"init_from": "base.ckpt"}, {"lora": {"rank": 4, "save": "merged"}}])
def test_an_ensemble_refuses_options_that_load_or_adapt_one_network(clash: dict) -> None:
    with pytest.raises(ConfigError, match=f"--model.ensemble 2 trains classifiers .*--model.{next(iter(clash))}"):
        TextClassification(ensemble=2, **clash)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="--model.ensemble"):
            TextClassification(ensemble=bad)
