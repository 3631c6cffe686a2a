"""Checkpoints in training: the task module of a .ckpt, and the weights a network starts from (`init_from`)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tetraformer.payload import (
    PAYLOAD_KEY,
    CheckpointError,
    StartingPoint,
    directory_starting_point,
    network_config,
    network_state,
    read_checkpoint,
)


def load_task_module(path: str | Path, map_location: str | torch.device = "cpu") -> Any:
    """The trained TaskModule of a checkpoint, in eval mode, found through its stored class path."""
    ckpt = read_checkpoint(path)
    class_path = ckpt.get("hyper_parameters", {}).get("_class_path") or ckpt[PAYLOAD_KEY]["class_path"]
    module_name, _, class_name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.load_from_checkpoint(path, map_location=map_location, weights_only=True).eval()


def load_network(path: str | Path) -> tuple[nn.Module, Any]:
    """(network, tokenizer) of a checkpoint, through its task module when it names one."""
    payload = read_checkpoint(path)[PAYLOAD_KEY]
    if payload.get("class_path"):
        module = load_task_module(path)
        return module.net, module.tokenizer
    raise CheckpointError(f"{path} names no task class; it can only serve as --model.init_from")


def load_weights(net: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """Copy matching tensors into `net`; a missing key or a shape mismatch is an error naming both."""
    own = net.state_dict()
    missing = sorted(set(own) - set(state))
    if missing:
        raise ValueError(f"{source}: missing weights for {missing[:8]}{' ...' if len(missing) > 8 else ''}")
    for key, tensor in own.items():
        if state[key].shape != tensor.shape:
            raise ValueError(
                f"{source}: tensor '{key}' has shape {tuple(state[key].shape)}, model expects {tuple(tensor.shape)}"
            )
    net.load_state_dict({k: state[k] for k in own})


def starting_point(source: str | Path) -> StartingPoint:
    """(config, network weights) of a Tetraformer checkpoint, or of a directory a registered source reads."""
    path = Path(source)
    if path.is_dir():
        return directory_starting_point(path)
    ckpt = read_checkpoint(path)
    return network_config(ckpt), network_state(ckpt)
