"""`tetraformer convert to-hf CKPT OUT_DIR`: a checkpoint's network, tokenizer, labels and decoding defaults as a
Hugging Face model folder; `convert to-peft CKPT OUT_DIR`: a LoRA checkpoint's adapters as a PEFT adapter folder."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tetraformer.core.lora import LoRAConfig, is_adapter_key
from tetraformer.data.tokenizer import decoder_start_token
from tetraformer.errors import TetraformerError
from tetraformer.interop import load_hf
from tetraformer.interop.convert import export_network
from tetraformer.interop.files import check_export_dir
from tetraformer.interop.generation import hf_generation_config
from tetraformer.interop.peft_export import write_peft
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint
from tetraformer.training.base.lora_runs import LORA_KEY
from tetraformer.training.base.text_generation import GenerativeTask
from tetraformer.training.checkpointing.loading import BACKBONE_PREFIX, load_task_module, require_task, starting_point
from tetraformer.training.checkpointing.stored_spec import stored_spec

log = logging.getLogger(__name__)


def export_checkpoint(ckpt: Path, out_dir: Path) -> Path:
    """Write the checkpoint's model to `out_dir` (new, empty or a previous export: refused before any loading)."""
    check_export_dir(out_dir)
    payload = read_checkpoint(ckpt)[PAYLOAD_KEY]
    require_task(ckpt, payload)
    module = load_task_module(ckpt)
    labels = stored_spec(payload).labels
    names, multi_label = (labels.names, labels.multi_label) if labels is not None else (None, False)
    generation = export_generation(module)
    out = export_network(module.net, module.tokenizer, out_dir, names, multi_label, generation)
    log.info("%s -> %s (%s)", ckpt, out, load_hf(out).architecture)
    return out


def export_generation(module: Any) -> dict[str, Any] | None:
    """generation_config.json of a task that generates text: its decoding defaults and the tokens it stops at."""
    if not isinstance(module, GenerativeTask) or module.tokenizer is None:
        return None
    encoder_decoder = getattr(module.net.cfg, "is_encoder_decoder", False)
    start = decoder_start_token(module.tokenizer) if encoder_decoder else None
    decoding = dataclasses.asdict(module.generation)
    return hf_generation_config(decoding, module.stop_token_ids(), module.tokenizer, start)


def export_adapters(ckpt: Path, out_dir: Path, base_name: str | None = None) -> Path:
    """Write a LoRA checkpoint's adapters to `out_dir` as a PEFT folder for its base (`base_name`: the
    base_model_name_or_path to write instead of the base's path, e.g. its name on the Hub)."""
    check_export_dir(out_dir)
    payload = read_checkpoint(ckpt)[PAYLOAD_KEY]
    require_task(ckpt, payload)
    stored = payload.get(LORA_KEY)
    if not stored:
        raise TetraformerError(
            f"{ckpt} holds no LoRA adapters (a LoRA run saves them with --model.lora.save adapters, the default): "
            "`tetraformer convert to-hf` exports its whole model"
        )
    module = load_task_module(ckpt)
    base = module.lora.found_base(stored, module.init_from)
    if base_name is None and not (base / "config.json").is_file():
        log.warning(
            "the base %s is a Tetraformer checkpoint, which transformers does not load: export it with "
            "`tetraformer convert to-hf %s DIR` and name DIR with --base (the folder's base_model_name_or_path)",
            base,
            base,
        )
    whole = changed_from_base(module.net, base)
    out = write_peft(
        module.net, LoRAConfig(**stored["config"]), out_dir, base_name or str(base), module.tokenizer, whole
    )
    log.info("%s -> %s: PEFT adapters for %s", ckpt, out, base_name or base)
    return out


def changed_from_base(net: nn.Module, base: Path) -> list[str]:
    """Frozen tensors of the network that are not the base's (rows the task grew, as a chat template's tokens): the
    adapter folder carries them whole; grown ones mean the base must be resized before loading (said in one line)."""
    _, state = starting_point(base)
    changed, grown = [], {}
    for name, param in net.named_parameters():
        key = name if name in state else name.removeprefix(BACKBONE_PREFIX)
        if param.requires_grad or is_adapter_key(name) or key not in state:
            continue
        if param.shape != state[key].shape:
            grown[name] = (state[key].shape[0], param.shape[0])
        if param.shape != state[key].shape or not torch.equal(param.detach(), state[key].to(param.dtype)):
            changed.append(name)
    if grown:
        rows = next(iter(grown.values()))
        log.warning(
            "%s: %d rows where %s has %d (grown for this task); the adapter folder holds them whole: load the base, "
            "resize it (a vocabulary: model.resize_token_embeddings(%d)), then PeftModel.from_pretrained",
            ", ".join(grown),
            rows[1],
            base,
            rows[0],
            rows[1],
        )
    return changed
