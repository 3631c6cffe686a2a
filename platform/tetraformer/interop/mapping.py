"""Declarative tensor maps between a Hugging Face state dict and ours, used in both directions.

A Rule names one tensor of our model and the Hugging Face tensor(s) it is made of: several HF tensors
concatenate along the output dimension (BERT's query, key, value -> our fused qkv; in rows of `sizes`
when they differ, as grouped-query attention's Q and K/V do), and `transpose` covers GPT-2's Conv1D, which
stores weights as (in, out).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from tetraformer.interop.errors import InteropError
from tetraformer.interop.weights import WeightReader, fill, fuse, split

log = logging.getLogger(__name__)

# Hugging Face activation names -> the core's; all of one core name compute the same function
ACTIVATIONS_FROM_HF = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "relu": "relu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_python_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu_accurate": "gelu_tanh",
}
ACTIVATIONS_TO_HF = {"gelu": "gelu", "relu": "relu", "gelu_tanh": "gelu_new"}
# keys that are not weights: buffers old checkpoints carry (position ids, GPT-2's causal mask)
BUFFER_SUFFIXES = ("position_ids", "attn.bias", "attn.masked_bias")
# config.json entries that describe the file rather than the model
VOLATILE_KEYS = ("architectures", "transformers_version", "_name_or_path", "dtype", "torch_dtype")


@dataclass(frozen=True)
class Rule:
    """One tensor of our model and the Hugging Face tensor(s) it is made of."""

    ours: str  # key in our model's state dict
    theirs: tuple[str, ...]  # HF keys, concatenated along dim 0 (after transposing)
    transpose: bool = False  # HF stores the 2-D weight as (in, out)
    sizes: tuple[int, ...] | None = None  # rows of each HF tensor when they are not equal parts


def fused(ours: str, theirs: tuple[str, ...], sizes: tuple[int, ...], names: tuple[str, ...]) -> list[Rule]:
    """Rules for the `names` (weight, bias) of a projection fused from HF tensors of `sizes` output rows."""
    return [Rule(f"{ours}.{name}", tuple(f"{t}.{name}" for t in theirs), sizes=sizes) for name in names]


def weight_and_bias(ours: str, *theirs: str, transpose: bool = False) -> list[Rule]:
    """Rules for the `.weight` and `.bias` of a linear layer or norm."""
    return [Rule(f"{ours}.{name}", tuple(f"{t}.{name}" for t in theirs), transpose) for name in ("weight", "bias")]


def import_state(model: nn.Module, rules: list[Rule], reader: WeightReader) -> None:
    """Fill every tensor of `model` from its rule; tied tensors follow the tensor they share."""
    target = model.state_dict()
    for rule in rules:
        fill(target, rule.ours, _gather(rule, reader, tuple(target[rule.ours].shape)))
    aliases = tied_aliases(model)
    for alias, source in aliases.items():
        target[alias] = target[source]
    unfilled = sorted(set(target) - {r.ours for r in rules} - set(aliases))
    if unfilled:
        raise InteropError(f"{reader.source}: the converter sets no value for {unfilled}")
    model.load_state_dict(target)


def _gather(rule: Rule, reader: WeightReader, shape: tuple[int, ...]) -> Tensor:
    """Our tensor of `shape` from the rule's HF tensors, each checked against the shape it must have."""
    rows = rule.sizes or (shape[0] // len(rule.theirs),) * len(rule.theirs)
    parts = []
    for key, n in zip(rule.theirs, rows, strict=True):
        part = (n, *shape[1:])
        parts.append(
            _orient(reader.take(key, part[::-1] if rule.transpose and len(part) == 2 else part), rule.transpose)
        )
    return fuse(*parts) if len(parts) > 1 else parts[0]


def export_state(model: nn.Module, rules: list[Rule]) -> dict[str, Tensor]:
    """Hugging Face tensors from our model: each rule's tensor split, transposed and copied."""
    state, out = model.state_dict(), {}
    for rule in rules:
        for key, part in zip(rule.theirs, split(state[rule.ours], rule.sizes or len(rule.theirs)), strict=True):
            out[key] = _orient(part, rule.transpose).clone()  # own storage: safetensors refuses shared tensors
    return out


def _orient(tensor: Tensor, transpose: bool) -> Tensor:
    """Swap (in, out) <-> (out, in) for 2-D weights of transposed rules; biases pass through."""
    return tensor.t() if transpose and tensor.ndim == 2 else tensor


def tied_aliases(model: nn.Module) -> dict[str, str]:
    """State-dict keys that share a tensor with an earlier key (tied weights): alias -> first key."""
    first: dict[int, str] = {}
    aliases = {}
    for key, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) in first:
            aliases[key] = first[id(tensor)]
        else:
            first[id(tensor)] = key
    return aliases


def base_prefix(weights: Mapping[str, Tensor], prefix: str) -> str:
    """`prefix` when the checkpoint nests its backbone under it (head models), else "" (base models)."""
    return prefix if any(k.startswith(prefix) for k in weights) else ""


def resolve_tie(weights: dict[str, Tensor], copy_key: str, source_key: str, tie: bool) -> bool:
    """Whether an output matrix is tied, as transformers decides; drops the redundant copy when it is.

    transformers unties when the checkpoint holds both tensors with different values.
    """
    copy, source = weights.get(copy_key), weights.get(source_key)
    if not tie or copy is None or source is None:
        return tie
    if copy.shape != source.shape or not bool((copy == source).all()):
        return False
    del weights[copy_key]
    return True


def activation_from_hf(name: Any, field: str, source: str) -> str:
    """The core activation computing the same function as a Hugging Face activation name."""
    if name not in ACTIVATIONS_FROM_HF:
        raise InteropError(f"{source}: {field}={name!r} is not supported; supported: {sorted(ACTIVATIONS_FROM_HF)}")
    return ACTIVATIONS_FROM_HF[name]


def activation_to_hf(activation: str, original: Any, family: str) -> str:
    """The HF name for a core activation, keeping the checkpoint's own name when it means the same."""
    if ACTIVATIONS_FROM_HF.get(original) == activation:
        return original
    if activation not in ACTIVATIONS_TO_HF:
        raise InteropError(f"{family} has no {activation!r} activation; exportable: {sorted(ACTIVATIONS_TO_HF)}")
    return ACTIVATIONS_TO_HF[activation]


def check_supported(hf: dict, source: str, allowed: dict[str, tuple[Any, ...]]) -> None:
    """Error for a config entry set to a value the core cannot reproduce (absent entries take HF's default)."""
    for field, values in allowed.items():
        if field in hf and hf[field] not in values:
            raise InteropError(f"{source}: config.json sets {field}={hf[field]!r}; Tetraformer supports only {values}")


def require(cfg: Any, family: str, expected: dict[str, Any]) -> None:
    """Error when a core config cannot be written as `family` (a field differs from what it needs)."""
    wrong = {k: getattr(cfg, k) for k, v in expected.items() if getattr(cfg, k) != v}
    if wrong:
        needed = {k: expected[k] for k in wrong}
        raise InteropError(f"cannot export as {family}: the model has {wrong}, {family} needs {needed}")


def kept_config(hf: dict) -> dict:
    """The loaded config.json minus entries that describe the old file (they are rewritten on save)."""
    return {k: v for k, v in hf.items() if k not in VOLATILE_KEYS}


def import_model(
    model: nn.Module,
    rules: list[Rule],
    weights: dict[str, Tensor],
    source: str,
    ignored: tuple[str, ...] = (),
) -> None:
    """Fill `model` by its rules and log the tensors left out (`ignored`: copies transformers skips too)."""
    reader = WeightReader(weights, source)
    import_state(model, rules, reader)
    reader.used.update(k for k in ignored if reader.has(k))
    report_unused(reader, model.architecture)


def report_unused(reader: WeightReader, architecture: str) -> None:
    """Log one line naming the checkpoint tensors the conversion left out."""
    unused = [k for k in reader.unused() if not k.endswith(BUFFER_SUFFIXES)]
    if unused:
        log.warning("%s: %s ignores %d tensors: %s", reader.source, architecture, len(unused), unused)
