"""Exact resume of a LoRA run whose checkpoints hold only the adapters: the base comes back from --model.init_from."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from tests.training.resume_runs import checkpoint, fit, same_weights, write_config
from tetraformer.payload import NETWORK_PREFIX

END = 10  # the runs' last step: past the validations at steps 5 and 10, the stop at 7 between them
LORA = ("--model.lora.rank", "4", "--model.lora.dropout", "0.1", "--model.lora.targets", "[q, k, v, o, ff_in, ff_out]")


def test_lora_run_resumes_exactly(uninterrupted: Path, tmp_path: Path) -> None:
    """A LoRA run (adapter dropout on) stopped at step 7 and resumed ends with the adapters of the run that never
    stopped, bit for bit; its checkpoints hold adapters only."""
    base = (
        "--model.init_from",
        str(uninterrupted / "checkpoints" / "last.ckpt"),
        *LORA,
        "--trainer.max_steps",
        str(END),
    )
    whole = tmp_path / "whole"
    fit(write_config(tmp_path, whole / "run"), *base)
    stopped = tmp_path / "stopped"
    fit(write_config(tmp_path, stopped / "run"), *base, "--trainer.max_steps", "7")
    assert checkpoint(stopped / "run")["global_step"] == 7
    resumed = tmp_path / "resumed" / "run"
    shutil.copytree(stopped / "run", resumed)
    fit(write_config(tmp_path / "resumed", resumed), *base, "--ckpt_path", "last")
    final = checkpoint(resumed)
    assert final["global_step"] == END
    adapters = {k: v for k, v in final["state_dict"].items() if k.startswith(NETWORK_PREFIX)}
    assert adapters and all(".lora_" in k for k in adapters)
    assert all(v.abs().sum() > 0 for k, v in adapters.items() if ".lora_b." in k)  # the adapters trained
    assert same_weights(resumed, whole / "run")
    tampered = tmp_path / "tampered" / "run"  # the control: resuming does start from the stopped run's adapters
    shutil.copytree(stopped / "run", tampered)
    ckpt = checkpoint(tampered)
    ckpt["state_dict"][next(k for k in adapters if ".lora_b." in k)] += 0.5
    torch.save(ckpt, tampered / "checkpoints" / "last.ckpt")
    fit(write_config(tmp_path / "tampered", tampered), *base, "--ckpt_path", "last")
    assert checkpoint(tampered)["global_step"] == END and not same_weights(tampered, whole / "run")
