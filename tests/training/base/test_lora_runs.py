"""LoRARun: the optimizer sees only adapters; adapter and merged checkpoints round-trip into a task's network."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.core.lora import LoRAConfig, LoRALinear, lora_layers
from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.payload import NETWORK_PREFIX, PAYLOAD_KEY
from tetraformer.training.base.lora_runs import LoRARun, base_checksum
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


def _base_file(path: Path, seed: int = 0) -> Path:
    """A stand-in base checkpoint file: some bytes the checksum reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"w": torch.randn(64, generator=torch.Generator().manual_seed(seed))}, path)
    return path


def test_an_adapter_checkpoint_records_its_base_by_path_and_content(tmp_path: Path) -> None:
    """The payload names the base by its resolved path and the checksum of its bytes."""
    module, run = _module("adapters")
    module.init_from = str(_base_file(tmp_path / "base.ckpt"))
    ckpt = _checkpoint(module.net)
    run.save(module, ckpt)
    stored = ckpt[PAYLOAD_KEY]["lora"]
    assert stored["base"] == module.init_from and stored["base_hash"] == base_checksum(module.init_from)


def test_a_moved_base_is_found_through_init_from(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The recorded path gone, --model.init_from's copy with the same content is the base (said in one line)."""
    base = _base_file(tmp_path / "old" / "base.ckpt")
    stored = {"base": str(base), "base_hash": base_checksum(base)}
    moved = base.rename(tmp_path / "moved.ckpt")
    with caplog.at_level(logging.INFO, logger="tetraformer.training.base.lora_runs"):
        assert LoRARun(None).found_base(stored, str(moved)) == moved
    assert f"LoRA base {base} moved: found at {moved}" in caplog.text


def test_a_different_base_is_refused_naming_both_paths(tmp_path: Path) -> None:
    """Another base's weights under --model.init_from (the recorded one moved away): one line, both paths."""
    base = _base_file(tmp_path / "base.ckpt")
    stored = {"base": str(base), "base_hash": base_checksum(base)}
    other = _base_file(tmp_path / "other.ckpt", seed=1)
    base.unlink()
    with pytest.raises(TetraformerError) as err:
        LoRARun(None).found_base(stored, str(other))
    message = str(err.value)
    assert str(other) in message and str(base) in message and "differ" in message and "\n" not in message


def test_a_base_replaced_in_place_is_refused(tmp_path: Path) -> None:
    """The recorded path holding other weights now: refused too."""
    base = _base_file(tmp_path / "base.ckpt")
    stored = {"base": str(base), "base_hash": base_checksum(base)}
    _base_file(base, seed=1)
    with pytest.raises(TetraformerError, match="not the base these LoRA adapters were trained on"):
        LoRARun(None).found_base(stored, None)


def test_a_lost_base_says_how_to_give_it(tmp_path: Path) -> None:
    """No base at the recorded path and no --model.init_from: put it back, or give its new place."""
    stored = {"base": str(tmp_path / "gone.ckpt"), "base_hash": "0"}
    with pytest.raises(TetraformerError, match="--model.init_from NEW_PATH") as err:
        LoRARun(None).found_base(stored, str(tmp_path / "also-gone.ckpt"))
    assert str(tmp_path / "gone.ckpt") in str(err.value)
    assert "generate, convert and evaluate read the recorded path" in str(err.value)  # they take no --model.*


def test_an_old_checkpoint_without_a_hash_loads_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Checkpoints written before hashes were kept still find their base; the log says it went unchecked."""
    base = _base_file(tmp_path / "base.ckpt")
    with caplog.at_level(logging.INFO, logger="tetraformer.training.base.lora_runs"):
        assert LoRARun(None).found_base({"base": str(base)}, None) == base
    assert "records no content hash" in caplog.text and str(base) in caplog.text


def test_resuming_on_another_base_is_refused(tmp_path: Path) -> None:
    """A fit resumed with --model.init_from on other weights than the checkpoint's base: refused before it trains."""
    module, run = _module("adapters", fitting=True)
    module.init_from = str(_base_file(tmp_path / "base.ckpt"))
    ckpt = _checkpoint(module.net)
    run.save(module, ckpt)
    resumed, other_run = _module("adapters", fitting=True)
    resumed.init_from = str(_base_file(tmp_path / "other.ckpt", seed=1))
    with pytest.raises(TetraformerError, match="other.ckpt is not the base"):
        other_run.load(resumed, ckpt)
    resumed.init_from = str(tmp_path / "base.ckpt")
    other_run.load(resumed, ckpt)  # the same base: taken


def test_a_folder_checksum_reads_its_weights_not_its_place(tmp_path: Path) -> None:
    """A Hugging Face folder's checksum: weights and config.json by name; moving the folder or editing its
    tokenizer keeps it, editing a weight changes it."""
    folder = tmp_path / "base"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    _base_file(folder / "model.safetensors")
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    before = base_checksum(folder)
    (folder / "tokenizer.json").write_text('{"edited": 1}', encoding="utf-8")
    moved = folder.rename(tmp_path / "moved")
    assert base_checksum(moved) == before
    _base_file(moved / "model.safetensors", seed=1)
    assert base_checksum(moved) != before


def test_adapters_need_the_base_they_adapt() -> None:
    """--model.lora.adapters without --model.init_from: one line naming both options."""
    with pytest.raises(ConfigError, match="--model.lora.adapters peft/ adapts the model it was trained on"):
        LoRARun(LoRAConfig(adapters="peft/")).check_base(None)
