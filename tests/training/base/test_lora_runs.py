"""LoRARun: the optimizer sees only adapters; adapter and merged checkpoints round-trip into a task's network."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.core.lora import LoRAConfig, LoRALinear, lora_layers
from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.payload import NETWORK_PREFIX, PAYLOAD_KEY
from tetraformer.training.base.lora_runs import LoRARun
from tetraformer.training.base.optim import OptimizerConfig, build_optimizer

CFG = TransformerConfig(d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=50, max_len=16, dropout=0.0)


def _module(save: str, fitting: bool = False) -> tuple[Any, LoRARun]:
    """A stand-in task module holding a LoRA network with trained (non-zero) adapters."""
    run = LoRARun({"rank": 4, "targets": ["q", "v", "o", "ff_in", "ff_out"], "save": save})
    trainer = SimpleNamespace(state=SimpleNamespace(fn="fit" if fitting else "predict"))
    module = SimpleNamespace(net=CausalLM(CFG).eval(), init_from="base.ckpt", lora_trains_head=False, _trainer=trainer)
    run.adapt(module, module.net)
    with torch.no_grad():
        for layer in lora_layers(module.net):
            for b in layer.lora_b:
                b.normal_(0, 0.1)
    return module, run


def _checkpoint(net: nn.Module) -> dict[str, Any]:
    """A checkpoint dict as Lightning hands it to on_save_checkpoint."""
    return {"state_dict": {NETWORK_PREFIX + k: v.clone() for k, v in net.state_dict().items()}, PAYLOAD_KEY: {}}


def test_optimizer_holds_only_adapters() -> None:
    """build_optimizer's groups contain exactly the adapter tensors: the frozen base is not in them."""
    module, _ = _module("adapters")
    optimizer, _ = build_optimizer(module.net, OptimizerConfig(), 10, CFG.d_model)
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    adapters = {id(p) for layer in lora_layers(module.net) for p in (*layer.lora_a, *layer.lora_b)}
    assert held == adapters


def test_adapters_checkpoint_round_trip() -> None:
    """Saved: adapters only and the base's path; loaded into a network on the same base: the same outputs."""
    module, run = _module("adapters")
    ckpt = _checkpoint(module.net)
    run.save(module, ckpt)
    assert all(".lora_" in k for k in ckpt["state_dict"]) and ckpt[PAYLOAD_KEY]["lora"]["base"].endswith("base.ckpt")
    twin, _ = _module("adapters")
    twin.net.load_state_dict(
        {k: v for k, v in module.net.state_dict().items() if ".lora_" not in k}, strict=False
    )  # the same base
    run.load(twin, ckpt)
    twin.net.load_state_dict({k[len(NETWORK_PREFIX) :]: v for k, v in ckpt["state_dict"].items()})
    ids = torch.randint(1, 50, (2, 7))
    torch.testing.assert_close(twin.net(ids), module.net(ids), rtol=0, atol=0)


def test_merged_checkpoint_loads_as_a_plain_network() -> None:
    """A merged checkpoint has a plain network's keys; evaluating it, the LoRA network becomes that plain one."""
    module, run = _module("merged")
    ids = torch.randint(1, 50, (2, 7))
    expected = module.net(ids)
    ckpt = _checkpoint(module.net)
    run.save(module, ckpt)
    assert set(ckpt["state_dict"]) == {NETWORK_PREFIX + k for k in CausalLM(CFG).state_dict()}
    other, _ = _module("merged")
    run.load(other, ckpt)
    assert not any(isinstance(m, LoRALinear) for m in other.net.modules())
    other.net.load_state_dict({k[len(NETWORK_PREFIX) :]: v for k, v in ckpt["state_dict"].items()})
    torch.testing.assert_close(other.net(ids), expected, rtol=0, atol=1e-5)


def test_merged_checkpoint_cannot_resume_a_lora_fit() -> None:
    """Resuming a LoRA fit from merged weights would lose the adapters: one line saying what to do instead."""
    module, run = _module("merged")
    ckpt = _checkpoint(module.net)
    run.save(module, ckpt)
    fitting, _ = _module("merged", fitting=True)
    with pytest.raises(TetraformerError, match="init_from"):
        run.load(fitting, ckpt)


def test_no_lora_leaves_everything() -> None:
    """rank 0: the network is untouched and trains whole."""
    net = CausalLM(CFG)
    LoRARun(LoRAConfig()).adapt(SimpleNamespace(init_from=None, lora_trains_head=False), net)
    assert all(p.requires_grad for p in net.parameters()) and not any(True for _ in lora_layers(net))


def test_adapters_without_a_base_name_init_from() -> None:
    """A LoRA run that saves adapters needs --model.init_from: the line says so first (not --model.lora.save); merged
    weights of adapters on a network from scratch, or no LoRA at all, need none."""
    with pytest.raises(ConfigError) as err:
        LoRARun(LoRAConfig(rank=8)).check_base(None)
    assert str(err.value).startswith("--model.lora.rank 8 adapts a pretrained network, and --model.init_from is not")
    LoRARun(LoRAConfig(rank=8)).check_base("base.ckpt")
    LoRARun(LoRAConfig(rank=8, save="merged")).check_base(None)
    LoRARun(LoRAConfig()).check_base(None)
