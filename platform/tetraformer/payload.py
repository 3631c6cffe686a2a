"""The Tetraformer checkpoint format: what a .ckpt carries beside the weights, and where a network can start from.

A checkpoint is a torch-saved dict holding `state_dict` (network tensors under `net.`) and, under
PAYLOAD_KEY, plain data only: the task's class path, the model config, the tokenizer as JSON strings, the
data's DataSpec (DATA_SPEC_KEY) and the task's settings. Training writes it, interop builds it from Hugging
Face directories, and both read it here, so neither imports the other. `init_from` sources other than a .ckpt
(a Hugging Face model directory) are listed in STARTING_POINTS by name and imported when asked for.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from tetraformer.core.config import TransformerConfig
from tetraformer.errors import TetraformerError
from tetraformer.safe_loading import UnsafeCheckpointError, load_torch_file

PAYLOAD_KEY = "tetraformer"
DATA_SPEC_KEY = "data_spec"  # the payload's DataSpec state (older checkpoints keep labels etc. in "task")
PRECISION_KEY = "precision"  # the Trainer precision the run trained with ("bf16-mixed"), kept on resume
NETWORK_PREFIX = "net."  # where a TaskModule keeps its network in `state_dict`
HF_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


class CheckpointError(TetraformerError):
    """A file or directory that is not a Tetraformer checkpoint (or any other source a network can start from)."""


# --- plain data ------------------------------------------------------------------------------------
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


# --- writing ---------------------------------------------------------------------------------------
def make_payload(
    class_path: str | None, cfg: TransformerConfig, tokenizer: Any, task: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """The PAYLOAD_KEY entry: task class path, model config, tokenizer and task settings (plus `extra`)."""
    return {
        "class_path": class_path,
        "model_config": cfg.to_dict(),
        "tokenizer": tokenizer_state(tokenizer),
        "task": plain(task),
        **extra,
    }


def make_checkpoint(net: nn.Module, class_path: str | None, tokenizer: Any, **extra: Any) -> dict[str, Any]:
    """A whole checkpoint dict for a bare network (no training state), as Lightning would write its module.

    With a task class path it also carries the hyper-parameters LightningCLI rebuilds the task from.
    """
    ckpt: dict[str, Any] = {
        "state_dict": {NETWORK_PREFIX + k: v for k, v in net.state_dict().items()},
        PAYLOAD_KEY: make_payload(class_path, net.cfg, tokenizer, {}, **extra),
        "pytorch-lightning_version": version("lightning"),
    }
    if class_path:
        ckpt["hyper_parameters"] = {
            "_class_path": class_path,
            "_instantiator": "lightning.pytorch.cli.instantiate_module",
            "arch": net.cfg.to_dict(),
        }
    return ckpt


def save_checkpoint(ckpt: dict[str, Any], path: str | Path) -> Path:
    """Write a checkpoint dict with torch.save."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, out)
    return out


# --- reading ---------------------------------------------------------------------------------------
def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint file safely (tensors and plain data only, unless --trust_checkpoint); a file that is not one
    is a CheckpointError, one holding pickled objects an UnsafeCheckpointError."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a directory, not a Tetraformer checkpoint file (.ckpt)")
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        ckpt = load_torch_file(path)
    except (OSError, UnsafeCheckpointError):
        raise
    except Exception as err:  # noqa: BLE001 - torch's reasons (bad pickle, not a zip, code to run) all mean "not ours"
        raise CheckpointError(f"{path} is not a Tetraformer checkpoint: torch cannot read it{_hint(path)}") from err
    if not isinstance(ckpt, dict) or PAYLOAD_KEY not in ckpt:
        raise CheckpointError(f"{path} is not a Tetraformer checkpoint (no '{PAYLOAD_KEY}' entry){_hint(path)}")
    return ckpt


def _hint(path: Path) -> str:
    """What to do with a file that looks like Hugging Face weights."""
    if path.suffix in HF_WEIGHT_SUFFIXES or (path.parent / "config.json").is_file():
        return (
            "; for Hugging Face weights, give their model directory to --model.init_from "
            "or convert it with `tetraformer convert from-hf DIR OUT.ckpt`"
        )
    return ""


def network_state(ckpt: dict[str, Any], prefix: str = NETWORK_PREFIX) -> dict[str, Tensor]:
    """The network weights of a loaded checkpoint, without the module prefix."""
    return {k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)}


def network_config(ckpt: dict[str, Any]) -> TransformerConfig:
    """The model config a loaded checkpoint stores."""
    return TransformerConfig.from_dict(ckpt[PAYLOAD_KEY]["model_config"])


# --- starting points other than a .ckpt ------------------------------------------------------------
StartingPoint = tuple[TransformerConfig, dict[str, Tensor]]  # (config, network weights)


@dataclass(frozen=True)
class StartingPointSource:
    """A kind of directory a network can start from, and how to read its config and weights."""

    name: str  # what the user is told it expects, e.g. "a Hugging Face model directory"
    accepts: Callable[[Path], bool]  # whether a directory is of this kind
    load: Callable[[Path], StartingPoint]


# Where the kinds of directory `init_from` reads are defined, as "module:attribute" (each a StartingPointSource).
# An explicit list read here at lookup, so every command sees the same sources whatever it imported before; the
# payload names interop's by string, as configs name task classes, so it imports no model-format code itself.
STARTING_POINTS: tuple[str, ...] = ("tetraformer.interop.registry:HF_MODEL_DIRECTORY",)


def starting_point_sources(names: tuple[str, ...] | None = None) -> list[StartingPointSource]:
    """The sources STARTING_POINTS (or `names`) lists, imported now."""
    sources = []
    for name in STARTING_POINTS if names is None else names:
        module, attribute = name.split(":")
        sources.append(getattr(importlib.import_module(module), attribute))
    return sources


def directory_starting_point(path: Path, names: tuple[str, ...] | None = None) -> StartingPoint:
    """(config, weights) from the first source of STARTING_POINTS (or `names`) that accepts the directory, else a
    clear error."""
    sources = starting_point_sources(names)
    for source in sources:
        if source.accepts(path):
            return source.load(path)
    kinds = " or ".join(source.name for source in sources) or "a Hugging Face model directory"
    expected = f"expected a Tetraformer .ckpt file or {kinds}"
    raise CheckpointError(f"{path}: cannot start a network from this directory; {expected}")
