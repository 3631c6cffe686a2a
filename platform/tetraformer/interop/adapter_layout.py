"""Where each row of a core tensor goes in a Hugging Face checkpoint, as a family's own export writes it.

LoRA adapters and a PEFT folder's `modules_to_save` must follow the weights they belong to: a fused q|k|v split
into q_proj, k_proj and v_proj (or kept whole as GPT-2's c_attn), a Conv1D's transposed layout, T5's query scale
folded into the weights, any row order a family's export applies. Rather than a second table of names, the family's
`export_weights` runs on probes: each asked-for tensor replaced by its row numbers (then by ones), every other tensor
by an empty meta tensor of its shape (so nothing is copied); where a row lands, and what it is multiplied by, is
read off the exported probes. PEFT names modules as transformers' model holds them, which transformers 5 renamed
for some architectures (ViT's attention.attention.query is attention.q_proj, converted on load): keys here are the
model's (hf_names), through transformers' own renaming where it has one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import transformers
from torch import Tensor, nn

from tetraformer.interop.errors import InteropError
from tetraformer.interop.registry import HFModel, export_class

PEFT_PREFIX = "base_model.model."  # where a PEFT model keeps the Hugging Face model's modules


@dataclass(frozen=True)
class Part:
    """One Hugging Face tensor made of rows of one core tensor: its row j is ours[rows[j]] * factor[j]."""

    key: str  # the Hugging Face model's key, e.g. model.layers.0.self_attn.q_proj.weight
    rows: Tensor  # (n,) long: the core tensor's row of each Hugging Face row
    factor: Tensor  # (n,) float64: what the export multiplies that row by
    transpose: bool  # stored (in, out), as GPT-2's Conv1D

    @property
    def module(self) -> str:
        """The Hugging Face module holding the tensor (its key less the parameter name)."""
        return self.key.rpartition(".")[0]

    def to_hf(self, ours: Tensor) -> Tensor:
        """The Hugging Face tensor from the core tensor (or a tensor with the core tensor's rows, such as B)."""
        part = ours[self.rows] * self.factor.to(ours.dtype).view(-1, *[1] * (ours.ndim - 1))
        return part.t() if self.transpose and part.ndim == 2 else part

    def from_hf(self, theirs: Tensor) -> Tensor:
        """The core tensor's rows `rows` from the Hugging Face tensor (the inverse of to_hf)."""
        rows = theirs.t() if self.transpose and theirs.ndim == 2 else theirs
        return rows / self.factor.to(rows.dtype).view(-1, *[1] * (rows.ndim - 1))


def wrapper_of(net: nn.Module) -> HFModel:
    """The Hugging Face class a core network exports as, around the network (its tensors shared)."""
    return export_class(net).from_network(net, {})


def export_parts(model: HFModel, keys: Iterable[str]) -> dict[str, list[Part]]:
    """For each of `model`'s state-dict keys asked for, the Hugging Face tensors its export writes it into."""
    rules = [rule for rule in model.export_rules() if rule.ours in set(keys)]
    missing = sorted(set(keys) - {rule.ours for rule in rules})
    if missing:
        raise InteropError(f"{model.architecture} has no Hugging Face tensor for {missing}")
    state, rename = model.state_dict(keep_vars=True), hf_names(model)
    numbered = _export_probes(model, {r.ours: _probe(state[r.ours], numbered=True) for r in rules})
    ones = _export_probes(model, {r.ours: _probe(state[r.ours], numbered=False) for r in rules})
    parts: dict[str, list[Part]] = {}
    for rule in rules:
        for key in rule.theirs:
            index, factor = _rows(numbered[key], rule.transpose), _rows(ones[key], rule.transpose)
            rows = (index / factor).round().long() - 1
            parts.setdefault(rule.ours, []).append(Part(rename(key), rows, factor, rule.transpose))
    return parts


def _probe(tensor: Tensor, numbered: bool) -> Tensor:
    """A (rows, 1, ...) float64 stand-in for a tensor: its row numbers from 1, or ones."""
    shape = (tensor.shape[0], *[1] * (tensor.ndim - 1))
    values = torch.arange(1, tensor.shape[0] + 1, dtype=torch.float64) if numbered else torch.ones(tensor.shape[0])
    return values.to(torch.float64).view(shape)


def _rows(exported: Tensor, transpose: bool) -> Tensor:
    """One value per row of an exported probe (undoing a Conv1D's transpose)."""
    rows = exported.t() if transpose and exported.ndim == 2 else exported
    return rows.reshape(rows.shape[0], -1)[:, 0]


def _export_probes(model: HFModel, probes: dict[str, Tensor]) -> dict[str, Tensor]:
    """`model.export_weights()` with the probes in place of their tensors and meta tensors for all the others."""
    with _swapped(model, probes):
        return model.export_weights()


@contextmanager
def _swapped(model: nn.Module, values: dict[str, Tensor]) -> Iterator[None]:
    """Every parameter and buffer of `model` replaced, by values[key] where given, else by a meta tensor of its shape
    (export code reads names and shapes, and computes on the probes); all put back after."""
    saved = []
    for prefix, sub in model.named_modules(remove_duplicate=False):
        for store in (sub._parameters, sub._buffers):
            for name, tensor in list(store.items()):
                if tensor is not None:
                    key = f"{prefix}.{name}" if prefix else name
                    saved.append((store, name, tensor))
                    store[name] = values[key] if key in values else torch.empty_like(tensor, device="meta")
    try:
        yield
    finally:
        for store, name, tensor in reversed(saved):
            store[name] = tensor


def linear_modules(model: HFModel) -> dict[str, str]:
    """Every Hugging Face module made of one of `model`'s Linear layers: its name -> the layer's weight key."""
    linears = {name for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    rename = hf_names(model)
    found = {}
    for rule in model.export_rules():
        layer, _, param = rule.ours.rpartition(".")
        if layer in linears and param == "weight":
            found.update({rename(key).removesuffix(".weight"): rule.ours for key in rule.theirs})
    return found


def hf_keys(model: HFModel) -> dict[str, str]:
    """Every Hugging Face key of the model's export (as transformers' model holds it) -> our key it comes from."""
    rename = hf_names(model)
    return {rename(key): rule.ours for rule in model.export_rules() for key in rule.theirs}


def hf_names(model: HFModel) -> Callable[[str], str]:
    """Checkpoint key -> the key transformers' model of this architecture holds the tensor under."""
    return functools.partial(_renamed, model.architecture, json.dumps(model.export_config(), sort_keys=True))


@functools.lru_cache(maxsize=8)
def _renamings(architecture: str, config: str) -> tuple[list, list] | None:
    """transformers' load-time (renamings, converters) for the architecture, None where it has none (version 4)."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter, WeightRenaming
    except ImportError:  # transformers 4: a model holds its tensors under its checkpoints' names
        return None
    with torch.device("meta"):
        hf = getattr(transformers, architecture)(transformers.AutoConfig.for_model(**json.loads(config)))
    conversions = get_model_conversion_mapping(hf)
    return [c for c in conversions if isinstance(c, WeightRenaming)], [
        c for c in conversions if isinstance(c, WeightConverter)
    ]


def _renamed(architecture: str, config: str, key: str) -> str:
    """One checkpoint key as transformers' model of the architecture holds it."""
    found = _renamings(architecture, config)
    if found is None:
        return key
    from transformers.core_model_loading import rename_source_key

    renamed, converted = rename_source_key(key, *found)
    if converted is not None:
        raise InteropError(f"transformers converts {key} of {architecture} on load; its adapters cannot be mapped")
    return renamed


def names_in(model: HFModel, net: nn.Module) -> dict[str, str]:
    """The network's module and tensor names -> the same objects' names inside its Hugging Face wrapper."""
    inner = {id(obj): name for name, obj in _named(model)}
    return {name: inner[id(obj)] for name, obj in _named(net) if id(obj) in inner}


def _named(module: nn.Module) -> Iterator[tuple[str, object]]:
    """Every module, parameter and buffer of `module`, by name (shared ones under each name)."""
    yield from module.named_modules(remove_duplicate=False)
    yield from module.named_parameters(remove_duplicate=False)
    yield from module.named_buffers(remove_duplicate=False)


def target_names(adapted: set[str], modules: Iterable[str]) -> list[str]:
    """PEFT's target_modules for the `adapted` modules among all `modules`: for each, its shortest dotted end that
    names no module left out (PEFT takes a module whose name is an entry or ends in `.` + an entry)."""
    others = set(modules) - adapted
    targets = set()
    for name in adapted:
        parts = name.split(".")
        for n in range(1, len(parts) + 1):
            end = ".".join(parts[-n:])
            if not any(matches_target(end, other) for other in others):
                targets.add(end)
                break
    return sorted(targets)


def matches_target(target: str, module: str) -> bool:
    """Whether a target_modules entry names a module, as PEFT decides (the whole name, or its end after a dot)."""
    return module == target or module.endswith(f".{target}")
