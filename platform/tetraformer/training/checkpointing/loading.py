"""Checkpoints in training: the task module of a .ckpt, and the weights a network starts from (`init_from`)."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tetraformer.core.lora import strip_lora
from tetraformer.data.tokenizer import load_tokenizer
from tetraformer.payload import (
    PAYLOAD_KEY,
    CheckpointError,
    StartingPoint,
    directory_starting_point,
    network_config,
    network_state,
    read_checkpoint,
    tokenizer_from_state,
)
from tetraformer.safe_loading import checkpoints_trusted

log = logging.getLogger(__name__)
BACKBONE_PREFIX = "backbone."  # where task networks keep a reusable backbone (SequenceClassifier, MaskedLM)


def load_task_module(path: str | Path, map_location: str | torch.device = "cpu") -> Any:
    """The trained TaskModule of a checkpoint, in eval mode, found through its stored class path."""
    ckpt = read_checkpoint(path)
    class_path = ckpt.get("hyper_parameters", {}).get("_class_path") or ckpt[PAYLOAD_KEY]["class_path"]
    module_name, _, class_name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    weights_only = not checkpoints_trusted()  # read_checkpoint refused pickled objects unless trusted
    return cls.load_from_checkpoint(path, map_location=map_location, weights_only=weights_only).eval()


def load_network(path: str | Path) -> tuple[nn.Module, Any]:
    """(network, tokenizer) of a checkpoint, through its task module when it names one."""
    require_task(path, read_checkpoint(path)[PAYLOAD_KEY])
    module = load_task_module(path)
    return module.net, module.tokenizer


def require_task(path: str | Path, payload: dict[str, Any]) -> None:
    """Refuse a checkpoint that names no task class (an imported model only an `init_from` can use)."""
    if not payload.get("class_path"):
        raise CheckpointError(f"{path} names no task class; it can only serve as --model.init_from")


def load_weights(net: nn.Module, state: dict[str, torch.Tensor], source: str) -> str:
    """Copy the source's tensors into `net`: the whole network, or only its `backbone` when the source is one;
    returns what was loaded, for the caller to log when it is true (a resumed fit's checkpoint replaces it).

    A source holding every tensor of `net` loads whole. Otherwise a network with a `backbone` attribute takes
    the source's `backbone.*` tensors (a task network on the same backbone, e.g. masked LM) or the source
    itself (a bare backbone, an imported Hugging Face encoder, a language model whose head is left out),
    keeps its own head fresh and says both. A missing key or a shape mismatch is an error naming both.
    """
    backbone = getattr(net, "backbone", None)
    if isinstance(backbone, nn.Module) and not set(net.state_dict()) <= set(state):
        return _load_backbone(net, backbone, state, source)
    _load_exact(net, state, source)
    return f"loaded all {len(net.state_dict())} tensors"


def _load_backbone(net: nn.Module, backbone: nn.Module, state: dict[str, torch.Tensor], source: str) -> str:
    """Load a backbone from a source's `backbone.*` tensors (or all of them); say what stays unused or fresh."""
    inner = {k[len(BACKBONE_PREFIX) :]: v for k, v in state.items() if k.startswith(BACKBONE_PREFIX)}
    prefix = BACKBONE_PREFIX if inner else ""
    inner = inner or state
    _load_exact(backbone, inner, source)
    left_out = sorted(prefix + k for k in set(inner) - set(backbone.state_dict()))
    left_out += sorted(k for k in state if prefix and not k.startswith(prefix))
    fresh = sorted(k for k in net.state_dict() if not k.startswith(BACKBONE_PREFIX))
    return (
        f"loaded the backbone ({len(backbone.state_dict())} tensors); left out of the source: "
        f"{', '.join(left_out) or 'nothing'}; starting fresh: {', '.join(fresh) or 'nothing'}"
    )


def _load_exact(net: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """Copy matching tensors into `net`; a missing key or a shape mismatch is an error naming both."""
    state = adapted_state(net, state, source)
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


def adapted_state(net: nn.Module, state: dict[str, torch.Tensor], source: str) -> dict[str, torch.Tensor]:
    """The source's tensors after every module of `net` with an `adapt_source_state` hook fitted its own; logged.

    A module that can take a source trained at another shape defines the hook (a ViT patch embedding resizes
    its position grid to a new image size); `adapt_source_state(state, prefix)` edits the copy and says what.
    """
    state = dict(state)
    for name, module in net.named_modules():
        adapt = getattr(module, "adapt_source_state", None)
        if not callable(adapt):
            continue
        try:
            changes = adapt(state, f"{name}." if name else "")
        except ValueError as err:
            raise ValueError(f"{source}: {err}") from err
        for change in changes:
            log.info("%s: %s%s", source, f"{name}: " if name else "", change)
    return state


def source_tokenizer(source: str | Path) -> Any:
    """The tokenizer an `init_from` source was trained with: a checkpoint's stored one, a directory's files."""
    path = Path(source)
    if path.is_dir():
        return load_tokenizer(path)
    return tokenizer_from_state(read_checkpoint(path)[PAYLOAD_KEY]["tokenizer"])


def starting_point(source: str | Path) -> StartingPoint:
    """(config, network weights) of a Tetraformer checkpoint, or of a directory a source of
    payload.STARTING_POINTS reads; a checkpoint of LoRA adapters gives its base with the adapters merged."""
    path = Path(source)
    if path.is_dir():
        return directory_starting_point(path)
    ckpt = read_checkpoint(path)
    if ckpt[PAYLOAD_KEY].get("lora"):
        net = load_network(path)[0]
        strip_lora(net)
        return net.cfg, net.state_dict()
    return network_config(ckpt), network_state(ckpt)
