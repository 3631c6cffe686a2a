"""`tetraformer convert to-hf CKPT OUT_DIR`: a checkpoint's network, tokenizer, labels and decoding defaults as a
Hugging Face model folder."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from tetraformer.data.tokenizer import decoder_start_token
from tetraformer.interop import load_hf
from tetraformer.interop.convert import export_network
from tetraformer.interop.files import check_export_dir
from tetraformer.interop.generation import hf_generation_config
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint
from tetraformer.training.base.text_generation import GenerativeTask
from tetraformer.training.checkpointing.loading import load_task_module, require_task
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
