"""Strategies by name: `fsdp` shards each core Block (full shard); other names and configured objects pass through."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from jsonargparse import ArgumentParser
from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy, Strategy
from torch.distributed.fsdp import ShardingStrategy
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

from tests.training.forked_ranks import own_port
from tests.training.tiny_lm import assert_usable_checkpoint, cli_command, lm_config_file, lm_fit, quiet_env
from tetraformer.cli import main
from tetraformer.core.layers import Block
from tetraformer.training.distributed.strategies import platform_strategy


@pytest.fixture
def fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """In-process tiny LM fits."""
    return lm_fit(tmp_path, monkeypatch)


@pytest.mark.parametrize("name", ["fsdp", "fsdp_cpu_offload"])
def test_fsdp_by_name_shards_each_block(name: str) -> None:
    """The registered FSDP names become Lightning's FSDPStrategy, full-shard, with one unit per Block;
    `fsdp_cpu_offload` keeps its offload."""
    strategy = platform_strategy(name)
    assert type(strategy) is FSDPStrategy
    policy = strategy.kwargs["auto_wrap_policy"]
    assert isinstance(policy, ModuleWrapPolicy) and policy._module_classes == {Block}
    assert strategy.sharding_strategy == ShardingStrategy.FULL_SHARD
    assert strategy.kwargs["use_orig_params"]  # one optimizer over the original (named) parameters
    assert (strategy.cpu_offload is not None and strategy.cpu_offload.offload_params) == (name == "fsdp_cpu_offload")


@pytest.mark.parametrize("given", ["auto", "ddp", "ddp_spawn", "single_device"])
def test_other_names_are_lightnings(given: str) -> None:
    """Any other strategy name goes to Lightning untouched."""
    assert platform_strategy(given) == given


def test_configured_strategy_objects_win() -> None:
    """A strategy the config builds itself (class_path + init_args), FSDP included, is used as given."""
    own_fsdp = FSDPStrategy(sharding_strategy="SHARD_GRAD_OP")
    ddp = DDPStrategy(find_unused_parameters=True)
    assert platform_strategy(own_fsdp) is own_fsdp and platform_strategy(ddp) is ddp
    assert "auto_wrap_policy" not in own_fsdp.kwargs


def test_fsdp_on_cpu_is_a_one_line_error(fit: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Lightning's FSDP needs CUDA; asking for it on the CPU stops with one line that names the CPU choice."""
    with pytest.raises(SystemExit) as exit_info:
        fit("--trainer.strategy", "fsdp", "--trainer.devices", "2")
    assert exit_info.value.code == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "fsdp needs CUDA GPUs" in line and "--trainer.strategy ddp" in line


@pytest.mark.gpu
@pytest.mark.distributed
@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "activation_checkpointing"])
def test_fsdp_fit_on_gpus(tmp_path: Path, checkpointing: bool) -> None:
    """`--trainer.strategy fsdp` on the GPUs there are (up to 2) fits with Block units, bf16-mixed, and writes one
    full checkpoint with the eager network's weight names that loads anywhere and generates."""
    run = tmp_path / "run"
    config = lm_config_file(tmp_path, run, accelerator="gpu", devices=min(2, torch.cuda.device_count()))
    args = [
        "fit",
        "-c",
        str(config),
        "--trainer.strategy",
        "fsdp",
        "--trainer.precision",
        "bf16-mixed",
        "--trainer.max_steps",
        "6",
        "--trainer.val_check_interval",
        "3",
        "--model.arch.activation_checkpointing",
        str(checkpointing).lower(),
    ]
    done = subprocess.run(cli_command(*args), env=quiet_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sharding each Block as one FSDP unit" in done.stderr
    assert_usable_checkpoint(run)


@pytest.mark.distributed
def test_fsdp_units_sample_and_checkpoint_blocks_on_cpu_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two CPU processes under FSDP (emulated, forked from this one: tests/training/cpu_fsdp.py) train with
    checkpointed Block units, and the W&B samples table generates at each validation: every rank joins the forward,
    with the root's weights gathered, so the (sharded) embedding is whole."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    own_port(monkeypatch)
    run = tmp_path / "run"
    config = lm_config_file(
        tmp_path,
        run,
        devices=2,
        max_steps=6,
        val_check_interval=3,
        enable_checkpointing=False,  # the default callbacks stay, SamplesTable (--run.samples) among them
        strategy={"class_path": "tests.training.cpu_fsdp.CPUFSDP"},
    )
    main(["fit", "-c", str(config), "--run.wandb", "offline", "--model.arch.activation_checkpointing", "true"])
    tables = sorted(
        run.glob("wandb/offline-run-*/files/media/table/val/samples_*.table.json"),
        key=lambda path: int(path.name.split("_")[1]),  # W&B's step in the name, not zero-padded
    )
    assert len(tables) == 2  # steps 3 and 6
    (row,) = json.loads(tables[-1].read_text())["data"]
    assert row[:2] == [6, "First"] and row[2]


def test_yaml_fsdp_strategy_can_name_the_block_units() -> None:
    """The README's YAML (an FSDPStrategy with its own sharding and `auto_wrap_policy: [tetraformer.core.layers.Block]`)
    parses as the CLI parses a trainer strategy, and is used as written."""
    parser = ArgumentParser()
    parser.add_argument("--strategy", type=Strategy | str)
    given = {
        "class_path": "lightning.pytorch.strategies.FSDPStrategy",
        "init_args": {"sharding_strategy": "HYBRID_SHARD", "auto_wrap_policy": ["tetraformer.core.layers.Block"]},
    }
    strategy = parser.instantiate(parser.parse_object({"strategy": given})).strategy
    assert platform_strategy(strategy) is strategy
    assert strategy.sharding_strategy == ShardingStrategy.HYBRID_SHARD
    assert strategy.kwargs["auto_wrap_policy"]._module_classes == {Block}
