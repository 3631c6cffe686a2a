"""Reading and writing Hugging Face model directories: config.json, safetensors or .bin weights, tokenizer files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file
from torch import Tensor

from tetraformer.interop.errors import InteropError
from tetraformer.safe_loading import load_torch_file

TOKENIZER_FILES = (  # copied beside the weights on save: the tokenizer, its chat template, the generation defaults
    "tokenizer.json",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "added_tokens.json",
    "preprocessor_config.json",
)


def read_config(path: str | Path) -> dict:
    """config.json of a model directory, with an error naming the directory when it is missing."""
    config = Path(path) / "config.json"
    if not config.is_file():
        raise InteropError(f"{path}: no config.json (expected a Hugging Face model directory)")
    return json.loads(config.read_text(encoding="utf-8"))


def read_weights(path: str | Path) -> dict[str, Tensor]:
    """All tensors of a model directory: model.safetensors (sharded too), else pytorch_model.bin (weights only)."""
    root = Path(path)
    for index_name, loader in (
        ("model.safetensors.index.json", load_file),
        ("pytorch_model.bin.index.json", _load_bin),
    ):
        index = root / index_name
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            return {k: v for shard in shards for k, v in loader(root / shard).items()}
    if (root / "model.safetensors").is_file():
        return load_file(root / "model.safetensors")
    if (root / "pytorch_model.bin").is_file():
        return _load_bin(root / "pytorch_model.bin")
    present = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    raise InteropError(f"{root}: no model.safetensors or pytorch_model.bin (found: {present})")


def _load_bin(path: Path) -> dict[str, Tensor]:
    """A PyTorch state dict, loaded without unpickling code (unless --trust_checkpoint)."""
    return load_torch_file(path)


def write_model_dir(
    path: str | Path, config: dict, weights: dict[str, Tensor], tokenizer_dir: str | Path | None
) -> Path:
    """Write config.json and model.safetensors, and copy tokenizer files from tokenizer_dir when given."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    save_file(
        {k: v.detach().contiguous().cpu() for k, v in weights.items()},
        out / "model.safetensors",
        metadata={"format": "pt"},
    )
    if tokenizer_dir is not None:
        for name in TOKENIZER_FILES:
            if (Path(tokenizer_dir) / name).is_file():
                shutil.copy2(Path(tokenizer_dir) / name, out / name)
    return out
