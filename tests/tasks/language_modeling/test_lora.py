"""LoRA fine-tuning of a language model through the CLI: adapter checkpoints, merged checkpoints, generate, to-hf."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import GPT2LMHeadModel

from tests.tasks.language_modeling.test_hf_finetune import hf_gpt2  # noqa: F401  (a fixture)
from tetraformer.cli import main
from tetraformer.core.lora import LoRALinear, lora_layers
from tetraformer.interop import load_hf
from tetraformer.payload import NETWORK_PREFIX, PAYLOAD_KEY, read_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module

LORA = ("--model.lora.rank", "4", "--model.lora.alpha", "8", "--model.lora.targets", "[q, v, o, ff_in]")


def _net_tensors(ckpt: dict) -> dict[str, torch.Tensor]:
    """The network tensors a checkpoint file holds."""
    return {k[len(NETWORK_PREFIX) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(NETWORK_PREFIX)}


def test_lora_fit_adapters_then_merged(
    run_cli: Callable[..., Path],
    hf_gpt2: Path,  # noqa: F811
    text_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A LoRA fit (activation checkpointing on) stores only trained adapters and a reference to the base; it loads
    back over the base, generates and exports to transformers with equal logits; the same run saved merged is a
    plain checkpoint with the same logits."""
    data = {"train_path": str(text_file), "documents": "line", "tokenizer": str(hf_gpt2)}
    common = ("--model.init_from", str(hf_gpt2), *LORA, "--trainer.max_steps", "6")
    checkpointing = ("--model.arch.activation_checkpointing", "true")
    adapters = run_cli("fit", *common, *checkpointing, root=tmp_path / "a", **data) / "checkpoints" / "last.ckpt"
    stored = read_checkpoint(adapters)
    tensors = _net_tensors(stored)
    assert tensors and all(".lora_a." in k or ".lora_b." in k for k in tensors)  # no base tensor in the file
    assert stored[PAYLOAD_KEY]["lora"]["base"] == str(hf_gpt2.resolve())
    optimized = sum(len(g["params"]) for g in stored["optimizer_states"][0]["param_groups"])
    assert optimized == len(tensors)  # the optimizer holds the adapters only

    net = load_task_module(adapters).net
    base = load_hf(hf_gpt2).core.state_dict()
    state = net.state_dict()
    assert all(torch.equal(state[k], v) for k, v in base.items())  # frozen: the base weights as they were
    trained = [b for layer in lora_layers(net) for b in layer.lora_b]
    assert trained and all(b.abs().sum() > 0 for b in trained)  # every adapter moved, through checkpointed blocks

    main(["generate", "--ckpt", str(adapters), "--prompt", "First", "--max-new-tokens", "4", "--greedy"])
    assert capsys.readouterr().out.startswith("First")
    ids = torch.randint(0, net.cfg.vocab_size, (2, 12))
    with torch.no_grad():
        ours = net(ids)
    out = tmp_path / "exported"
    main(["convert", "to-hf", str(adapters), str(out)])
    with torch.no_grad():
        torch.testing.assert_close(
            GPT2LMHeadModel.from_pretrained(out).eval()(input_ids=ids).logits, ours, atol=1e-4, rtol=0
        )

    unchanged = ("--model.optim.lr", "0", "--trainer.max_steps", "1")
    again = run_cli("fit", "--model.init_from", str(adapters), *unchanged, root=tmp_path / "c", **data)
    with torch.no_grad():  # an adapters checkpoint as a starting point: its base with the adapters merged
        torch.testing.assert_close(
            load_task_module(again / "checkpoints" / "last.ckpt").net(ids), ours, atol=1e-5, rtol=0
        )

    merged = run_cli("fit", *common, *checkpointing, "--model.lora.save", "merged", root=tmp_path / "m", **data)
    merged_ckpt = read_checkpoint(merged / "checkpoints" / "last.ckpt")
    assert set(_net_tensors(merged_ckpt)) == set(base) and "lora" not in merged_ckpt[PAYLOAD_KEY]
    plain = load_task_module(merged / "checkpoints" / "last.ckpt").net
    assert not any(isinstance(m, LoRALinear) for m in plain.modules())
    with torch.no_grad():
        torch.testing.assert_close(plain(ids), ours, atol=1e-5, rtol=0)


def test_adapters_need_a_base(
    run_cli: Callable[..., Path], text_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Adapters without --model.init_from would refer to no base: one line naming it (and --model.lora.save merged)."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", *LORA, "--trainer.max_steps", "1", train_path=str(text_file), documents="line")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--model.init_from is not set" in err and "--model.lora.save merged" in err
