"""Whole-model conversion between Tetraformer checkpoints and Hugging Face directories."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import lightning
import torch
from torch import nn

from tetraformer.core import CausalLM, ImageEncoder, Seq2SeqLM, TextEncoder
from tetraformer.interop.errors import InteropError
from tetraformer.interop.registry import HFModel, load_hf, save_hf

log = logging.getLogger(__name__)


def export_classes() -> dict[type[nn.Module], type[HFModel]]:
    """The Hugging Face class each core family exports as."""
    from tetraformer.interop import bert, gpt2, t5, vit

    return {
        CausalLM: gpt2.HFGPT2LMHeadModel, Seq2SeqLM: t5.HFT5ForConditionalGeneration,
        TextEncoder: bert.HFBertModel, ImageEncoder: vit.HFViTModel,
    }  # fmt: skip


def export_network(net: nn.Module, tokenizer: Any, out_dir: str | Path) -> Path:
    """Write a core network (and its tokenizer) as a Hugging Face model directory."""
    wrapper = export_classes().get(type(net))
    if wrapper is None:
        known = ", ".join(c.__name__ for c in export_classes())
        raise InteropError(f"no Hugging Face export for a {type(net).__name__} network (exportable: {known})")
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer_dir = None
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
            tokenizer_dir = Path(tmp)
        return save_hf(wrapper(net, {}, tokenizer_dir), out_dir)


def import_checkpoint(src_dir: str | Path, task_class_path: str | None) -> dict[str, Any]:
    """A Tetraformer checkpoint dict (weights, config, tokenizer) from a Hugging Face model directory."""
    from tetraformer.data import load_tokenizer
    from tetraformer.training.checkpoint import PAYLOAD_KEY, tokenizer_state

    core = load_hf(src_dir).core
    tokenizer = _optional_tokenizer(src_dir, load_tokenizer)
    payload = {
        "class_path": task_class_path, "model_config": core.cfg.to_dict(), "tokenizer": tokenizer_state(tokenizer),
        "task": {}, "source": str(src_dir),
    }  # fmt: skip
    ckpt: dict[str, Any] = {
        "state_dict": {f"net.{k}": v for k, v in core.state_dict().items()},
        PAYLOAD_KEY: payload,
        "pytorch-lightning_version": lightning.__version__,
    }
    if task_class_path:
        ckpt["hyper_parameters"] = {
            "_class_path": task_class_path, "_instantiator": "lightning.pytorch.cli.instantiate_module",
            "arch": core.cfg.to_dict(),
        }  # fmt: skip
    return ckpt


def _optional_tokenizer(src_dir: str | Path, load: Any) -> Any:
    """The directory's tokenizer, or None (logged) when it ships none."""
    try:
        return load(src_dir)
    except Exception as err:  # noqa: BLE001 - any loader failure means "no usable tokenizer here"
        log.warning(
            "%s: no tokenizer imported (%s); pass --data.tokenizer when training from it", src_dir, err
        )
        return None


def save_checkpoint(ckpt: dict[str, Any], path: str | Path) -> Path:
    """Write a checkpoint dict with torch.save."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, out)
    return out
