"""The issue's whole path: a Llama-family checkpoint folder, LoRA-tuned on chat JSONL in one command, chatted with,
and exported merged to a folder that `transformers` loads and generates from as the checkpoint does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers

from tests.cli_runner import last_metrics
from tests.tasks.instruction_tuning.conftest import qwen2_folder
from tetraformer.cli import main
from tetraformer.training.checkpointing.loading import load_task_module

QUESTION = [{"role": "user", "content": "What is the opposite of hot?"}]


def test_lora_tune_a_qwen2_folder_on_chats_chat_and_export(
    run_cli: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fit --model.init_from QWEN2_DIR --model.lora.* (padded batches, validated): an adapters checkpoint;
    `generate --chat` answers from it; `convert to-hf` writes merged weights whose logits and greedy reply equal the
    checkpoint's."""
    src = qwen2_folder(tmp_path / "qwen2")
    lora = ["--model.lora.rank", "4", "--model.lora.alpha", "8", "--model.lora.targets", "[q, k, v, o, ff_in, ff_out]"]
    run = run_cli("fit", "--model.init_from", str(src), *lora, batching="padded")
    assert "val/loss" in last_metrics(run)  # padded batches fit and validate
    ckpt = run / "checkpoints" / "last.ckpt"
    stored = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    assert stored and all(".lora_" in name for name in stored)  # adapters only: the base is the folder
    capsys.readouterr()
    main(["generate", "--ckpt", str(ckpt), "--chat", "--prompt", QUESTION[0]["content"]])
    reply = capsys.readouterr().out.rstrip("\n")
    module = load_task_module(ckpt)
    main(["convert", "to-hf", str(ckpt), str(tmp_path / "exported")])
    exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "exported").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "exported")
    prompt = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ids = prompt["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(module.net(ids), exported(input_ids=ids).logits, atol=1e-4, rtol=0)
        out = exported.generate(ids, max_new_tokens=6, do_sample=False)  # stops where its generation_config says
    theirs = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert reply == theirs, (reply, theirs)
    assert len(out[0]) > len(ids[0]) and reply, "the exported model generated nothing to compare"
