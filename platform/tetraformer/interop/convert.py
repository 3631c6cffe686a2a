"""Whole-model conversion between Tetraformer checkpoints and Hugging Face directories."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from tetraformer.core.lora import strip_lora
from tetraformer.core.models import CausalLM
from tetraformer.data import DataError, load_tokenizer
from tetraformer.data.tokenizer import decoder_start_token
from tetraformer.interop.errors import InteropError
from tetraformer.interop.files import check_export_dir, staged_export
from tetraformer.interop.generation import write_generation_config
from tetraformer.interop.registry import export_class, load_hf, save_hf
from tetraformer.payload import make_checkpoint

log = logging.getLogger(__name__)


def export_network(
    net: nn.Module,
    tokenizer: Any,
    out_dir: str | Path,
    labels: list[str] | None = None,
    multi_label: bool = False,
    generation: Mapping[str, Any] | None = None,
) -> Path:
    """Write a core network (and its tokenizer) as the Hugging Face architecture its family exports as.

    A classifier's `labels` (its label vocabulary, in output order) become config.json's id2label/label2id; the
    tokenizer's special tokens its pad/bos/eos (and an encoder-decoder's decoder start) ids; `generation`
    (hf_generation_config's entries) its generation_config.json. LoRA adapters are merged into their weights first
    (in place: `net` becomes the plain network it exports). `out_dir` must be new, empty or a previous export
    (check_export_dir); it is written whole or not at all (staged_export).
    """
    check_export_dir(out_dir)
    merged = strip_lora(net)
    if merged:
        log.info("merged the LoRA adapters of %d layers into their weights", len(merged))
    wrapper = export_class(net)
    hf_config = token_config(tokenizer, net) if tokenizer is not None else {}
    hf_config |= label_config(labels, multi_label) if labels else {}
    with tempfile.TemporaryDirectory() as tmp, staged_export(out_dir) as stage:
        tokenizer_dir = None
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
            tokenizer_dir = Path(tmp)
            if isinstance(net, CausalLM):
                plain_text_encoding(tokenizer_dir / "tokenizer.json")
        save_hf(wrapper.from_network(net, hf_config, tokenizer_dir), stage)
        if generation:
            write_generation_config(stage, generation)
    return Path(out_dir)


def plain_text_encoding(path: Path) -> None:
    """A causal LM's exported tokenizer.json encodes text as its training and `generate` did: without the `<s> A </s>`
    a Tetraformer-trained tokenizer adds for encoders. Else `tokenizer(prompt)` in transformers (pipelines, lm-eval's
    hf model) would end every prompt with `</s>`, the end of a document. Other post-processors (a Llama folder's
    BOS) stay as they are."""
    if not path.is_file():
        return
    spec = json.loads(path.read_text(encoding="utf-8"))
    processor = spec.get("post_processor") or {}
    parts = processor.get("processors", [processor]) if processor.get("type") == "Sequence" else [processor]
    kept = [part for part in parts if not _adds_document_ends(part)]
    if len(kept) == len(parts):
        return
    spec["post_processor"] = None if not kept else kept[0] if len(kept) == 1 else {**processor, "processors": kept}
    path.write_text(json.dumps(spec, ensure_ascii=False, indent=2), encoding="utf-8")


def _adds_document_ends(processor: dict) -> bool:
    """Whether a post-processor is the template `<s> $A </s>` (data/tokenizer.py's `_special_template`)."""
    single = [next(iter(piece.values())).get("id") for piece in processor.get("single", [])]
    return processor.get("type") == "TemplateProcessing" and single == ["<s>", "A", "</s>"]


def token_config(tokenizer: Any, net: nn.Module) -> dict:
    """config.json's special-token ids from the tokenizer the model was trained with (what `generate` reads)."""
    names = ("pad_token_id", "bos_token_id", "eos_token_id")
    config = {name: getattr(tokenizer, name) for name in names if getattr(tokenizer, name, None) is not None}
    if getattr(getattr(net, "cfg", None), "is_encoder_decoder", False):
        config["decoder_start_token_id"] = decoder_start_token(tokenizer)
    return config


def label_config(labels: list[str], multi_label: bool) -> dict:
    """config.json entries naming a classifier's outputs (and its problem type when multi-label)."""
    config: dict = {"id2label": {str(i): name for i, name in enumerate(labels)}}
    config["label2id"] = {name: i for i, name in enumerate(labels)}
    if multi_label:
        config["problem_type"] = "multi_label_classification"
    return config


def import_checkpoint(
    src_dir: str | Path, task_class_path: str | None, tokenizer_dir: str | Path | None = None
) -> dict[str, Any]:
    """A Tetraformer checkpoint dict (weights, config, tokenizer) from a Hugging Face model directory.

    The tokenizer is `tokenizer_dir`'s when given, else `src_dir`'s; without one the checkpoint has none (logged
    for text models; an image model embeds no tokens and needs none).
    """
    core = load_hf(src_dir).core
    if tokenizer_dir:
        tokenizer = load_tokenizer(tokenizer_dir)
    else:
        tokenizer = _source_tokenizer(src_dir) if core.cfg.vocab_size else None
    if tokenizer is not None and len(tokenizer) > core.cfg.vocab_size:
        raise InteropError(
            f"{tokenizer_dir or src_dir}: the tokenizer has {len(tokenizer)} tokens but {src_dir} embeds only "
            f"{core.cfg.vocab_size}; give the model's own tokenizer with --tokenizer DIR"
        )
    return make_checkpoint(core, task_class_path, tokenizer, source=str(src_dir))


def _source_tokenizer(src_dir: str | Path) -> Any:
    """The model directory's own tokenizer, or None with a warning saying how to give one."""
    try:
        return load_tokenizer(src_dir)
    except DataError as err:
        log.warning(
            "%s; the checkpoint has no tokenizer: convert again with --tokenizer DIR (a tokenizer.json or "
            "Hugging Face tokenizer directory), or pass --data.tokenizer DIR when training from it",
            err,
        )
        return None
