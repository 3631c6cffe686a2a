"""Self-contained checkpoints: model config, tokenizer and task settings travel with the weights."""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tetraformer.core.config import TransformerConfig

PAYLOAD_KEY = "tetraformer"


def plain(value: Any) -> Any:
    """Dataclasses, tuples and paths turned into dicts, lists and strings, so `weights_only` loads accept them."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def tokenizer_state(tokenizer: Any) -> dict[str, Any] | None:
    """A Hugging Face fast tokenizer as JSON strings (no pickled code)."""
    if tokenizer is None:
        return None
    specials = {k: str(v) for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
    return {"tokenizer_json": tokenizer.backend_tokenizer.to_str(), "special_tokens": json.dumps(specials)}


def tokenizer_from_state(state: dict[str, Any] | None) -> Any:
    """Rebuild the fast tokenizer stored by `tokenizer_state`."""
    if state is None:
        return None
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_str(state["tokenizer_json"])
    return PreTrainedTokenizerFast(tokenizer_object=backend, **json.loads(state["special_tokens"]))


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint file safely (tensors and plain data only), with a clear error when it is missing."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if PAYLOAD_KEY not in ckpt:
        raise ValueError(f"{path} is not a Tetraformer checkpoint (no '{PAYLOAD_KEY}' entry)")
    return ckpt


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
    raise ValueError(f"{path} names no task class; it can only serve as --model.init_from")


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


def starting_point(source: str | Path) -> tuple[TransformerConfig, dict[str, torch.Tensor]]:
    """(config, network weights) of a Tetraformer checkpoint or a Hugging Face model directory."""
    path = Path(source)
    if path.is_dir():
        from tetraformer.interop import load_hf

        core = load_hf(path).core
        return core.cfg, core.state_dict()
    payload = read_checkpoint(path)[PAYLOAD_KEY]
    return TransformerConfig.from_dict(payload["model_config"]), network_state(path)


def network_state(path: str | Path, prefix: str = "net.") -> dict[str, torch.Tensor]:
    """The network weights of a Tetraformer checkpoint, without the module prefix."""
    state = read_checkpoint(path)["state_dict"]
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
