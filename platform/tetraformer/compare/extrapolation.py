"""Length extrapolation: a trained language model's validation loss at 1x, 2x, 4x ... its training length.

The task module comes from the run's checkpoint (its stored class path) and the datamodule from the
checkpoint's data hyper-parameters with a longer block size, tokenized by the checkpoint's own tokenizer, so the
platform names no task. A model whose weights fix its longest sequence (a learned position table) gets a text
saying so at the lengths beyond it; every other position type is rebuilt for the longer length with the same
weights (sinusoidal tables and rotary, ALiBi and relative biases are computed from the length).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tetraformer.payload import read_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module

log = logging.getLogger(__name__)
CHECKPOINTS = ("best.ckpt", "last.ckpt")  # the one evaluated: the best when the run kept it


def extrapolate(run_dir: Path, factors: list[int], max_tokens: int | None = None) -> dict[str, float | str]:
    """{"1x": loss, "2x": loss, ...}: mean validation loss per token at factor x the training block size.

    `max_tokens` caps the tokens evaluated at each length (the first validation blocks, so every length reads
    the same text); a length the model cannot take is a text naming why (e.g. "n/a: learned positions cover
    128 tokens").
    """
    ckpt_path = _checkpoint(Path(run_dir))
    module = load_task_module(ckpt_path)
    data_hparams = dict(read_checkpoint(ckpt_path).get("datamodule_hyper_parameters", {}))
    block_size = int(data_hparams["block_size"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    results: dict[str, float | str] = {}
    for factor in factors:
        length = factor * block_size
        net = _network_for(module, length)
        if isinstance(net, str):
            results[f"{factor}x"] = net
            continue
        module.net = net.to(device).eval()
        module.to(device)
        datamodule = _datamodule(data_hparams, length, module.tokenizer)
        results[f"{factor}x"] = _validation_loss(module, datamodule, device, max_tokens)
        log.info("%s: validation loss %s at %d tokens (%dx)", run_dir, results[f"{factor}x"], length, factor)
    return results


def _checkpoint(run_dir: Path) -> Path:
    """RUN_DIR/checkpoints/best.ckpt, else last.ckpt."""
    for name in CHECKPOINTS:
        path = run_dir / "checkpoints" / name
        if path.is_file():
            return path
    raise FileNotFoundError(f"{run_dir / 'checkpoints'} holds none of {', '.join(CHECKPOINTS)}")


def _network_for(module: Any, length: int) -> nn.Module | str:
    """The trained network rebuilt for sequences of `length` tokens, or why its weights cannot take them."""
    cfg = module.net.cfg
    if length <= cfg.max_len:
        return module.net
    longer = module.make_network(cfg.replace(max_len=length))
    state = module.net.state_dict()
    own = longer.state_dict()
    if set(own) != set(state) or any(own[k].shape != state[k].shape for k in own):
        return f"n/a: {cfg.position} positions cover {cfg.max_len} tokens"
    longer.load_state_dict(state)
    return longer


def _datamodule(hparams: dict[str, Any], block_size: int, tokenizer: Any) -> Any:
    """The run's datamodule with another block size, using the checkpoint's tokenizer, set up for validation."""
    init_args = {k: v for k, v in hparams.items() if k not in ("_class_path", "_instantiator")}
    module_name, _, class_name = hparams["_class_path"].rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    datamodule = cls(**{**init_args, "block_size": block_size})
    datamodule.tokenizer = tokenizer
    datamodule.setup("validate")
    return datamodule


@torch.no_grad()
def _validation_loss(module: Any, datamodule: Any, device: torch.device, max_tokens: int | None) -> float:
    """Token-weighted mean of the task's validation loss over the validation batches (up to `max_tokens`)."""
    total, tokens = 0.0, 0
    for batch in datamodule.val_dataloader():
        batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        count = module.batch_tokens(batch)
        total += float(module.compute(batch, "val")["loss"]) * count
        tokens += count
        if max_tokens is not None and tokens >= max_tokens:
            break
    if tokens == 0:
        raise ValueError(f"the validation split holds no block of {datamodule.block_size} tokens")
    return total / tokens
