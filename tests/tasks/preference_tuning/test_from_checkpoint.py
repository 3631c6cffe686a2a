"""Preference tuning from an instruction-tuning checkpoint, every weight trained (the reference a frozen copy of the
start), in-process: the chat model's tokenizer and template carry over, the copy stays out of the checkpoint, and
`validate` from the checkpoint alone rebuilds the reference from init_from and scores as the fit did."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.cli_runner import checkpoint_command, config_runner, last_metrics
from tests.tasks.preference_tuning.conftest import tiny_config
from tetraformer.data.chat import DEFAULT_CHAT_TEMPLATE
from tetraformer.training.checkpointing.loading import load_task_module

pytestmark = pytest.mark.slow  # in-process fits


@pytest.fixture(scope="module")
def from_sft(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DPO of every weight from the instruction-tuning reference run's last.ckpt (16 steps); the run folder."""
    root = tmp_path_factory.mktemp("dpo-from-sft")
    sft = trained_run / "checkpoints" / "last.ckpt"
    with pytest.MonkeyPatch.context() as patch:
        return config_runner(root, patch, tiny_config)("fit", model={"init_from": str(sft)})


def test_the_chat_model_carries_over_and_the_copy_stays_out(from_sft: Path, trained_run: Path) -> None:
    """The run keeps the SFT checkpoint's tokenizer (no row grown) and chat template; its checkpoint holds the
    network's tensors only (no reference copy), every weight trained away from the start; loaded alone, its reference
    is the start again."""
    sft = load_task_module(trained_run / "checkpoints" / "last.ckpt")
    ckpt = from_sft / "checkpoints" / "last.ckpt"
    tuned = load_task_module(ckpt)
    assert tuned.tokenizer.get_vocab() == sft.tokenizer.get_vocab()
    assert tuned.tokenizer.chat_template == DEFAULT_CHAT_TEMPLATE and tuned.sample_prompts
    stored = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    assert set(stored) == {f"net.{name}" for name in tuned.net.state_dict()}
    before = sft.net.state_dict()
    assert all(not torch.equal(before[k], v) for k, v in tuned.net.state_dict().items() if k.endswith("weight"))
    reference = tuned.reference_network()[0].state_dict()  # loaded alone: rebuilt from init_from
    assert all(torch.equal(before[k], v) for k, v in reference.items())


def test_validate_from_the_checkpoint_alone_scores_as_the_fit(from_sft: Path, tmp_path: Path) -> None:
    """`validate --ckpt_path` (its data from the checkpoint's settings, the reference rebuilt from init_from) logs
    the rewards and accuracies of the fit's last validation."""
    fitted = last_metrics(from_sft)
    out = checkpoint_command("validate", from_sft / "checkpoints" / "last.ckpt", tmp_path / "eval")
    again = last_metrics(out)
    names = ("val/loss", "val/rewards_chosen", "val/rewards_rejected", "val/reward_margin", "val/reward_accuracy")
    assert all(again[name] == pytest.approx(fitted[name], abs=1e-5) for name in names), (again, fitted)
    assert fitted["val/reward_margin"] != 0
