"""A LoRA run started from a PEFT folder (--model.lora.adapters): the run takes the folder's settings and adapters,
computes PEFT's logits, and its adapter checkpoint rebuilds the same network without the folder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers
from peft import LoraConfig, get_peft_model
from torch import nn

from tests.interop.text_checkpoints import random_hf_model
from tetraformer.core.lora import LoRAConfig, apply_lora
from tetraformer.errors import OptionError
from tetraformer.interop import load_hf
from tetraformer.payload import NETWORK_PREFIX, PAYLOAD_KEY
from tetraformer.training.base.lora_runs import LoRARun, base_checksum

QWEN2 = dict(
    vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, tie_word_embeddings=False,
)  # fmt: skip


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path, nn.Module]:
    """A tiny Qwen2 folder, a DoRA adapter folder peft made on it (B and magnitudes moved), and that PEFT model."""
    base = tmp_path / "base"
    random_hf_model("Qwen2ForCausalLM", transformers.Qwen2Config(**QWEN2)).save_pretrained(base)
    model = transformers.Qwen2ForCausalLM.from_pretrained(base)
    peft_cfg = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj"], use_dora=True)
    theirs = get_peft_model(model, peft_cfg).eval()
    with torch.no_grad():
        for name, param in theirs.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.3)
            elif "magnitude" in name:
                param.mul_(1.2)
    theirs.save_pretrained(tmp_path / "peft")
    return base, tmp_path / "peft", theirs


def test_a_peft_folder_starts_the_run_and_its_checkpoint_rebuilds_it(
    folders: tuple[Path, Path, torch.nn.Module],
) -> None:
    """adapt() takes the folder's rank, alpha, DoRA and targets, with PEFT's logits; the checkpoint records that
    config (no folder needed again) and its base's checksum, and rebuilds the same network on the base."""
    base, adapters, theirs = folders
    module = SimpleNamespace(net=load_hf(base).core.eval(), init_from=str(base), lora_trains_head=False)
    run = LoRARun({"adapters": str(adapters)})
    run.adapt(module, module.net)
    assert (run.cfg.rank, run.cfg.alpha, run.cfg.dora, run.cfg.targets) == (4, 16.0, True, ["q", "v", "ff_in"])
    ids = torch.randint(0, 100, (2, 9))
    with torch.no_grad():
        expected = theirs(input_ids=ids).logits
        torch.testing.assert_close(module.net(ids), expected, rtol=0, atol=1e-4)
    ckpt = {"state_dict": {NETWORK_PREFIX + k: v for k, v in module.net.state_dict().items()}, PAYLOAD_KEY: {}}
    run.save(module, ckpt)
    stored = ckpt[PAYLOAD_KEY]["lora"]
    assert stored["config"]["adapters"] is None and stored["base_hash"] == base_checksum(base)
    rebuilt = load_hf(base).core.eval()
    apply_lora(rebuilt, LoRAConfig(**stored["config"]))
    state = {k.removeprefix(NETWORK_PREFIX): v for k, v in ckpt["state_dict"].items()}
    assert not rebuilt.load_state_dict(state, strict=False).unexpected_keys
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(ids), expected, rtol=0, atol=1e-4)


def test_an_option_the_folder_decides_is_named(folders: tuple[Path, Path, nn.Module]) -> None:
    """--model.lora.dora false is the default; --model.lora.alpha 8 beside a folder of alpha 16 is an error."""
    base, adapters, _ = folders
    module = SimpleNamespace(net=load_hf(base).core, init_from=str(base), lora_trains_head=False)
    with pytest.raises(OptionError, match="alpha"):
        LoRARun({"adapters": str(adapters), "alpha": 8.0}).adapt(module, module.net)
