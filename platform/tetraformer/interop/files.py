"""Reading and writing Hugging Face model directories: config.json, safetensors or .bin weights, tokenizer files."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from safetensors.torch import load_file, save_file
from torch import Tensor

from tetraformer.files import process_alive
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
EXPORT_MARK = ".tetraformer_export"  # written last into every export: a folder holding it may be replaced
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")  # a PEFT adapter folder's (convert to-peft)
EXPORT_FILES = frozenset({"config.json", "model.safetensors", *ADAPTER_FILES, *TOKENIZER_FILES, EXPORT_MARK})


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
        copy_tokenizer_files(tokenizer_dir, out)
    return out


def copy_tokenizer_files(tokenizer_dir: str | Path, out: Path) -> None:
    """Copy the TOKENIZER_FILES a folder has into `out`."""
    for name in TOKENIZER_FILES:
        if (Path(tokenizer_dir) / name).is_file():
            shutil.copy2(Path(tokenizer_dir) / name, out / name)


def check_export_dir(out: str | Path) -> None:
    """Refuse a destination that holds anything but a previous export: an export never overwrites a user's files."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InteropError(f"{out} is a file; give a folder to export into (a new or empty one)")
    found = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if not found or (EXPORT_MARK in found and set(found) <= EXPORT_FILES):
        return
    others = [name for name in found if name not in EXPORT_FILES or EXPORT_MARK not in found]
    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    raise InteropError(
        f"{out} is not empty and not a previous export (it holds {shown}); nothing was written: "
        "give a new or empty folder, or move those files away"
    )


@contextmanager
def staged_export(out: str | Path) -> Iterator[Path]:
    """A temporary folder beside `out` to write an export into; renamed to `out` (replacing an empty folder or a
    previous export) only when the block succeeds, removed when it fails, so `out` is never half-written."""
    out = Path(out)
    check_export_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_stages(out)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-{os.getpid()}-", dir=out.parent))
    try:
        yield stage
        (stage / EXPORT_MARK).write_text("written by `tetraformer convert`\n", encoding="utf-8")
        _replace(out, stage)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # gone already after a successful rename


def _replace(out: Path, stage: Path) -> None:
    """Put `stage` at `out`: a previous export (or empty folder) there is moved aside first, then removed."""
    old = out.with_name(f".{out.name}.old-{os.getpid()}-")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    stage.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _remove_stale_stages(out: Path) -> None:
    """Remove the temporary folders of exports to `out` whose process is gone (killed mid-way)."""
    for kind in ("partial", "old"):
        for stage in out.parent.glob(f".{out.name}.{kind}-*-*"):
            pid = stage.name.removeprefix(f".{out.name}.{kind}-").split("-")[0]
            if pid.isdigit() and not process_alive(int(pid)):
                shutil.rmtree(stage, ignore_errors=True)
