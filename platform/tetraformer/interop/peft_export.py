"""`tetraformer convert to-peft`: a network's LoRA adapters as a PEFT adapter folder (adapter_config.json and
adapter_model.safetensors), named as in the base Hugging Face model, which `PeftModel.from_pretrained` loads.

Each adapted core layer is written into the Hugging Face tensors its weight exports as (adapter_layout.Part). A
Hugging Face tensor inside one adapted slice takes that slice's A and its rows of B (a fused q|k|v split into
q_proj, k_proj, v_proj; a fused gate|up into gate_proj, up_proj). Several slices inside one Hugging Face tensor
(GPT-2's c_attn holds q, k and v) stack their A's, B block-diagonal: one LoRA of rank n*r, its alpha scaled to keep
the scale (rank_pattern/alpha_pattern say so); slices sharing one A keep it. DoRA's magnitudes follow their rows. A
fresh task head trained in full is `modules_to_save`; frozen tensors that differ from the base (a vocabulary grown
for a chat template) travel whole, as PEFT writes them.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor, nn

from tetraformer.core.lora import LoRAConfig, is_adapter_key
from tetraformer.core.lora_layer import LoRALinear
from tetraformer.interop.adapter_layout import (
    PEFT_PREFIX,
    Part,
    export_parts,
    linear_modules,
    matches_target,
    names_in,
    target_names,
    wrapper_of,
)
from tetraformer.interop.errors import InteropError
from tetraformer.interop.files import ADAPTER_FILES, check_export_dir, copy_tokenizer_files, staged_export

log = logging.getLogger(__name__)
# the PEFT task type of an architecture (by its name's end): what PeftModel.from_pretrained wraps it in
TASK_TYPES = {"ForCausalLM": "CAUSAL_LM", "LMHeadModel": "CAUSAL_LM", "ForConditionalGeneration": "SEQ_2_SEQ_LM"}


@dataclass(frozen=True)
class Adapter:
    """One Hugging Face module's LoRA: A (rank x in), B (out x rank), DoRA's magnitudes (out,), and its alpha."""

    a: Tensor
    b: Tensor
    m: Tensor | None
    alpha: float

    @property
    def rank(self) -> int:
        """The adapter's rank."""
        return self.a.shape[0]


def write_peft(
    net: nn.Module,
    cfg: LoRAConfig,
    out_dir: str | Path,
    base: str | None,
    tokenizer: Any = None,
    whole: Iterable[str] = (),
) -> Path:
    """Write the network's LoRA adapters (made under `cfg`) as a PEFT folder for the base `base` (written as its
    base_model_name_or_path); `whole`: names of frozen network tensors that differ from the base's, written whole.
    `out_dir` must be new, empty or a previous export; it is written whole or not at all."""
    check_export_dir(out_dir)
    model = wrapper_of(net)
    layers = {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}
    if not layers:
        raise InteropError("the network has no LoRA adapters: `convert to-peft` writes those of a LoRA checkpoint")
    names = names_in(model, net)
    trained = [n for n, p in model.named_parameters() if p.requires_grad and not is_adapter_key(n)]
    whole = [names[name] for name in whole]
    parts = export_parts(model, [f"{name}.weight" for name in layers] + trained + whole)
    layer_names = {inner: outer for outer, inner in names.items()}
    adapters = {}
    for name, layer in layers.items():
        _, alpha = cfg.layer_rank(layer_names[name])
        for part in parts[f"{name}.weight"]:
            adapter = part_adapter(layer, part, alpha, cfg.rslora)
            if adapter is not None:
                adapters[part.module] = adapter
    tensors = adapter_tensors(adapters)
    saved = _add_whole(model.state_dict(), {key: parts[key] for key in trained + whole}, set(adapters), tensors)
    config = adapter_config(model.architecture, adapters, linear_modules(model), cfg, base)
    config["modules_to_save"] = saved or None
    config["fan_in_fan_out"] = all(p.transpose for name in layers for p in parts[f"{name}.weight"])
    with tempfile.TemporaryDirectory() as tmp, staged_export(out_dir) as stage:
        (stage / ADAPTER_FILES[0]).write_text(json.dumps(config, indent=2), encoding="utf-8")
        save_file(tensors, stage / ADAPTER_FILES[1], metadata={"format": "pt"})
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
            copy_tokenizer_files(tmp, stage)
    log.info("%d LoRA adapters of %d layers -> %s (PEFT, for %s)", len(adapters), len(layers), out_dir, base)
    return Path(out_dir)


def part_adapter(layer: LoRALinear, part: Part, alpha: float, rslora: bool) -> Adapter | None:
    """The LoRA of one Hugging Face tensor made of rows of an adapted layer (None when no slice reaches it)."""
    if layer.merged:
        raise InteropError("the adapters are merged into the weights; unmerge them before writing them apart")
    inside = [((part.rows >= start) & (part.rows < end), start) for start, end in layer.slices]
    owners = [i for i, (mask, _) in enumerate(inside) if mask.any()]
    if not owners:
        return None
    rank = layer.lora_a[0].shape[0]
    shared = all(torch.equal(layer.lora_a[i], layer.lora_a[owners[0]]) for i in owners)
    a = layer.lora_a[owners[0]] if shared else torch.cat([layer.lora_a[i] for i in owners])
    b = torch.zeros(len(part.rows), a.shape[0], dtype=a.dtype)  # (n, rank): rows no slice reaches stay 0
    m = None if layer.lora_m is None else _base_norms(layer, part)
    for k, i in enumerate(owners):
        mask, start = inside[i]
        column = 0 if shared else k * rank
        rows = part.rows[mask] - start
        b[mask, column : column + rank] = layer.lora_b[i].detach()[rows] * part.factor[mask, None].to(a.dtype)
        if m is not None:
            m[mask] = layer.lora_m[i].detach()[rows] * part.factor[mask].abs().to(m.dtype)
    grown = a.shape[0] / rank  # stacked: rank n*r, alpha n (rsLoRA sqrt(n)) times the layer's, one scale
    return Adapter(a.detach().clone(), b, m, alpha * (grown**0.5 if rslora else grown))


def _base_norms(layer: LoRALinear, part: Part) -> Tensor:
    """DoRA's magnitude of rows no adapter changes: the norm of the base rows as the Hugging Face tensor holds
    them (m / ||W|| = 1 leaves them as they are)."""
    return layer.weight.detach()[part.rows].norm(dim=1) * part.factor.abs().to(layer.weight.dtype)


def adapter_tensors(adapters: dict[str, Adapter]) -> dict[str, Tensor]:
    """adapter_model.safetensors' tensors under PEFT's names."""
    tensors = {}
    for module, adapter in adapters.items():
        tensors[f"{PEFT_PREFIX}{module}.lora_A.weight"] = adapter.a.contiguous()
        tensors[f"{PEFT_PREFIX}{module}.lora_B.weight"] = adapter.b.contiguous()
        if adapter.m is not None:
            tensors[f"{PEFT_PREFIX}{module}.lora_magnitude_vector"] = adapter.m.contiguous()
    return tensors


def _add_whole(
    state: dict[str, Tensor], parts: dict[str, list[Part]], adapted: set[str], tensors: dict[str, Tensor]
) -> list[str]:
    """Add the tensors that travel whole to `tensors` (an adapted module's as its `base_layer`, as PEFT keeps
    them); the other modules they belong to, for modules_to_save."""
    saved = set()
    for key, key_parts in parts.items():
        for part in key_parts:
            module, _, param = part.key.rpartition(".")
            name = f"{module}.base_layer.{param}" if module in adapted else part.key
            tensors[PEFT_PREFIX + name] = part.to_hf(state[key].detach()).contiguous()
            saved.update(() if module in adapted else (module,))
    return sorted(saved)


def adapter_config(
    architecture: str, adapters: dict[str, Adapter], modules: Iterable[str], cfg: LoRAConfig, base: str | None
) -> dict[str, Any]:
    """adapter_config.json: the most common rank and alpha, patterns for the modules that differ from them."""
    targets = target_names(set(adapters), modules)
    (rank, alpha), _ = Counter((a.rank, a.alpha) for a in adapters.values()).most_common(1)[0]
    return {
        "peft_type": "LORA",
        "task_type": next((t for end, t in TASK_TYPES.items() if architecture.endswith(end)), None),
        "base_model_name_or_path": base,
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": cfg.dropout,
        "target_modules": targets,
        "use_rslora": cfg.rslora,
        "use_dora": cfg.dora,
        "bias": "none",
        "rank_pattern": _patterns({m: a.rank for m, a in adapters.items()}, targets, rank),
        "alpha_pattern": _patterns({m: a.alpha for m, a in adapters.items()}, targets, alpha),
        "inference_mode": True,
        "init_lora_weights": True,
    }


def _patterns(values: dict[str, float], targets: list[str], default: float) -> dict[str, float]:
    """PEFT's rank_pattern (or alpha_pattern): a target_modules entry whose modules all take one value other than
    the default, else each module that differs, by its whole name."""
    pattern: dict[str, float] = {}
    for target in targets:
        mine = {m: v for m, v in values.items() if matches_target(target, m)}
        differing = {m: v for m, v in mine.items() if v != default}
        if differing and len(set(mine.values())) == 1:
            pattern[target] = next(iter(mine.values()))
        else:
            pattern.update(differing)
    return pattern
