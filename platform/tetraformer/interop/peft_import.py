"""`--model.lora.adapters PEFT_DIR`: a PEFT LoRA folder made elsewhere (by peft on the Hugging Face model) as LoRA
adapters on the core network, computing what PEFT computes.

Each Hugging Face module's A, B (and DoRA magnitudes) go back through the rows its weight exports from
(adapter_layout.Part): the roles whose slices those rows fall in are the LoRA targets; a slice inside one module
takes its A and its rows of B (c_attn's q, k and v each keep the one A); a slice over several modules (our fused
gate|up over gate_proj and up_proj) stacks their A's, B block-diagonal, unless they share one. Per-layer ranks and
scales become rank_pattern/alpha_pattern. `modules_to_save` tensors load and train in full. What the core cannot
compute (another PEFT method, trained biases, a base the adapter changes) is refused in one line naming the file
and the key.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from tetraformer.core.lora import ROLES, LoRAConfig, pattern_value, targeted_linears
from tetraformer.errors import require
from tetraformer.interop.adapter_layout import (
    PEFT_PREFIX,
    Part,
    export_parts,
    hf_keys,
    linear_modules,
    matches_target,
    names_in,
    wrapper_of,
)
from tetraformer.interop.errors import InteropError
from tetraformer.safe_loading import load_torch_file

log = logging.getLogger(__name__)
# adapter_config.json entries naming another PEFT method, trained biases or a quantised base: set, refused
OTHER_METHODS = (
    "alora_invocation_tokens",
    "arrow_config",
    "kasa_config",
    "monteclora_config",
    "velora_config",
    "use_bdlora",
    "use_qalora",
    "lora_bias",
    "target_parameters",
    "trainable_token_indices",
    "layer_replication",
)
PLAIN_INITS = (True, False, "gaussian", "orthogonal")  # others (pissa, olora, loftq, corda...) change the base
SUFFIXES = {".lora_A.weight": "a", ".lora_B.weight": "b", ".lora_magnitude_vector": "m"}
LORA_FIELDS = ("rank", "alpha", "targets", "rslora", "dora", "rank_pattern", "alpha_pattern")  # the folder's to set


@dataclass(frozen=True)
class Contribution:
    """One Hugging Face module's adapter, and the rows of a core layer its weight is made of."""

    part: Part
    a: Tensor  # (rank, in)
    b: Tensor  # (n, rank), in the Hugging Face module's row order
    m: Tensor | None  # (n,) DoRA magnitudes
    scale: float  # PEFT's alpha / r (alpha / sqrt(r) with use_rslora)

    def inside(self, start: int, end: int) -> tuple[Tensor, Tensor]:
        """(mask of this module's rows in the core rows [start, end), those core rows less start)."""
        mask = (self.part.rows >= start) & (self.part.rows < end)
        return mask, self.part.rows[mask] - start


@dataclass
class PeftAdapters:
    """A PEFT folder read for one network: the LoRA config that rebuilds its adapters, and their values."""

    config: LoRAConfig
    plan: dict[str, list[list[Contribution]]]  # layer name -> per slice (apply_lora's order), what fills it
    whole: dict[str, tuple[Tensor, Tensor]] = field(default_factory=dict)  # tensor name -> (rows, their values)
    trained: list[str] = field(default_factory=list)  # tensor names that train in full (modules_to_save)

    def load_into(self, net: nn.Module) -> None:
        """Fill the adapters apply_lora(net, config) made, and the tensors the folder holds whole."""
        with torch.no_grad():
            for name, slices in self.plan.items():
                layer = net.get_submodule(name)
                for i, contributions in enumerate(slices):
                    _fill_slice(layer, i, contributions)
            params = dict(net.named_parameters(remove_duplicate=False))
            for name, (rows, values) in self.whole.items():
                params[name][rows] = values.to(params[name].dtype)
        for name in self.trained:
            params[name].requires_grad_(True)


def _fill_slice(layer: Any, i: int, contributions: list[Contribution]) -> None:
    """Slice i's A, B (and DoRA magnitudes) from the modules over its rows: stacked, or one A when they share it."""
    start, end = layer.slices[i]
    shared = all(torch.equal(c.a, contributions[0].a) for c in contributions)
    column = 0
    for c in contributions:
        mask, rows = c.inside(start, end)
        rank = c.a.shape[0]
        layer.lora_a[i][column : column + rank] = c.a.to(layer.lora_a[i].dtype)
        factor = c.part.factor[mask, None].to(c.b.dtype)
        layer.lora_b[i][:, column : column + rank][rows] = c.b[mask] / factor * (c.scale / layer.scale)
        if layer.lora_m is not None and c.m is not None:
            layer.lora_m[i][rows] = c.m[mask] / c.part.factor[mask].abs().to(c.m.dtype)
        column += 0 if shared else rank


def read_peft(net: nn.Module, folder: str | Path, given: LoRAConfig) -> PeftAdapters:
    """The adapters of a PEFT folder for the (plain, base-loaded) network; `given`: the run's LoRA options, whose
    rank, alpha, targets, rslora and dora the folder sets (an option set otherwise is an error)."""
    folder = Path(folder)
    config = read_config(folder / "adapter_config.json")
    tensors = read_tensors(folder)
    model = wrapper_of(net)
    modules = linear_modules(model)
    check_targets(config, modules, folder / "adapter_config.json")
    adapters, whole = _split(tensors, modules, config, folder)
    rules = hf_keys(model)
    unknown = sorted(k for k in whole if k not in rules)
    if unknown:
        raise InteropError(f"{_file(folder)}: {PEFT_PREFIX}{unknown[0]} names no tensor of the base model")
    parts = export_parts(model, {modules[m] for m in adapters} | {rules[k] for k in whole})
    names = {inner: outer for outer, inner in names_in(model, net).items()}
    contributions = _contributions(adapters, modules, parts, config, names)
    resolved, plan = _plan(net, contributions, config, given, folder)
    loaded = PeftAdapters(resolved, plan)
    _take_whole(loaded, net, whole, rules, parts, names, folder)
    log.info(
        "LoRA adapters from %s: %d modules, rank %d, alpha %g", folder, len(adapters), config["r"], config["lora_alpha"]
    )
    return loaded


def read_config(path: Path) -> dict[str, Any]:
    """adapter_config.json, refused in one line when it asks for what the core does not compute."""
    if not path.is_file():
        raise InteropError(f"{path.parent}: no adapter_config.json (expected a PEFT adapter folder)")
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("peft_type", "LORA") != "LORA":
        raise InteropError(f"{path}: peft_type {config['peft_type']!r}: only LoRA adapters load (peft_type LORA)")
    for key in OTHER_METHODS:
        if config.get(key):
            raise InteropError(
                f"{path}: {key} {config[key]!r} is not plain LoRA; only plain LoRA, rsLoRA and DoRA load"
            )
    if config.get("bias", "none") != "none":
        raise InteropError(f"{path}: bias {config['bias']!r}: trained biases do not load; only bias 'none' does")
    if config.get("init_lora_weights", True) not in PLAIN_INITS:
        raise InteropError(
            f"{path}: init_lora_weights {config['init_lora_weights']!r} changes the base weights; convert the adapter "
            "to plain LoRA first (peft's path_initial_model_for_weight_conversion)"
        )
    return {"r": 8, "lora_alpha": 8, "lora_dropout": 0.0, "rank_pattern": {}, "alpha_pattern": {}, **config}


def read_tensors(folder: Path) -> dict[str, Tensor]:
    """adapter_model.safetensors, else adapter_model.bin (tensors only)."""
    if (folder / "adapter_model.safetensors").is_file():
        return load_file(folder / "adapter_model.safetensors")
    if (folder / "adapter_model.bin").is_file():
        return load_torch_file(folder / "adapter_model.bin")
    raise InteropError(f"{folder}: no adapter_model.safetensors or adapter_model.bin (expected a PEFT adapter folder)")


def check_targets(config: dict[str, Any], modules: dict[str, str], path: Path) -> None:
    """Each target_modules entry must name layers the core adapts (by PEFT's matching; a string is a regex the whole
    module name matches)."""
    targets = config.get("target_modules") or []
    for target in [targets] if isinstance(targets, str) else targets:
        found = [
            m for m in modules if (re.fullmatch(target, m) if isinstance(targets, str) else matches_target(target, m))
        ]
        if not found:
            shown = sorted({m.rpartition(".")[2] for m in modules})
            raise InteropError(
                f"{path}: target_modules {target!r} names no layer LoRA adapts here (this model's: {shown})"
            )


def _split(
    tensors: dict[str, Tensor], modules: dict[str, str], config: dict[str, Any], folder: Path
) -> tuple[dict[str, dict[str, Tensor]], dict[str, tuple[Tensor, str]]]:
    """(Hugging Face module -> its A, B, m) and (Hugging Face key -> (tensor, "base" or "trained")) of the file."""
    saved = list(config.get("modules_to_save") or [])
    saved += ["classifier", "score"] if config.get("task_type") in ("SEQ_CLS", "TOKEN_CLS") else []
    adapters: dict[str, dict[str, Tensor]] = {}
    whole: dict[str, tuple[Tensor, str]] = {}
    for key, tensor in tensors.items():
        name = key.removeprefix(PEFT_PREFIX)
        name = name.removesuffix(".weight") if name.endswith(".lora_magnitude_vector.weight") else name  # older PEFT
        suffix = next((s for s in SUFFIXES if name.endswith(s)), None)
        if suffix is not None:
            module = name.removesuffix(suffix)
            if module not in modules:
                raise InteropError(f"{_file(folder)}: {key} adapts {module}, which is not a layer LoRA adapts here")
            adapters.setdefault(module, {})[SUFFIXES[suffix]] = tensor
        elif ".base_layer." in name:
            whole[name.replace(".base_layer.", ".")] = (tensor, "base")
        elif any(name.rpartition(".")[0].endswith(entry) for entry in saved):
            whole[name] = (tensor, "trained")
        else:
            raise InteropError(f"{_file(folder)}: {key} is neither a LoRA tensor nor under modules_to_save")
    for module, found in adapters.items():
        if "a" not in found or "b" not in found:
            raise InteropError(f"{_file(folder)}: {PEFT_PREFIX}{module} has lora_A or lora_B but not both")
        if "m" in found and not config.get("use_dora"):
            raise InteropError(f"{_file(folder)}: {PEFT_PREFIX}{module} has DoRA magnitudes but use_dora is false")
    return adapters, whole


def _contributions(
    adapters: dict[str, dict[str, Tensor]],
    modules: dict[str, str],
    parts: dict[str, list[Part]],
    config: dict[str, Any],
    names: dict[str, str],
) -> dict[str, list[Contribution]]:
    """Each module's adapter, by the network layer (its name in the network) its weight comes from."""
    found: dict[str, list[Contribution]] = {}
    for module, tensors in adapters.items():
        ours = modules[module]
        part = next(p for p in parts[ours] if p.module == module)
        rank = int(pattern_value(config["rank_pattern"], module, config["r"]))
        alpha = float(pattern_value(config["alpha_pattern"], module, config["lora_alpha"]))
        if tensors["a"].shape[0] != rank:
            raise InteropError(
                f"{module}: lora_A has rank {tensors['a'].shape[0]} but adapter_config.json gives it r={rank}"
            )
        scale = alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank
        layer = names[ours.removesuffix(".weight")]
        found.setdefault(layer, []).append(Contribution(part, tensors["a"], tensors["b"], tensors.get("m"), scale))
    return found


def _plan(
    net: nn.Module, found: dict[str, list[Contribution]], config: dict[str, Any], given: LoRAConfig, folder: Path
) -> tuple[LoRAConfig, dict[str, list[list[Contribution]]]]:
    """The LoRA config whose roles cover every adapted row (its ranks and scales per layer), and per layer and slice
    the adapters that fill it."""
    roles = [role for role in ROLES if _reaches(targeted_linears(net, [role]), found)]
    layers = targeted_linears(net, roles or ["q"])
    plan: dict[str, list[list[Contribution]]] = {}
    ranks, scales = {}, {}
    for name, (_, _, slices) in layers.items():
        per_slice = [[c for c in found.get(name, []) if c.inside(*s)[0].any()] for s in sorted(slices)]
        needed = [_slice_rank(cs) for cs in per_slice if cs]
        if needed:
            plan[name], ranks[name], scales[name] = per_slice, max(needed), per_slice_scale(per_slice)
    for name, contributions in found.items():
        covered = sum(int(c.inside(*s)[0].sum()) for c in contributions for s in layers.get(name, (0, 0, []))[2])
        if covered < sum(len(c.part.rows) for c in contributions):
            raise InteropError(f"{_file(folder)}: {contributions[0].part.module}'s rows are in no role LoRA adapts")
    rank, alpha, rslora = int(config["r"]), float(config["lora_alpha"]), bool(config.get("use_rslora"))
    resolved = replace(
        given,
        rank=rank,
        alpha=alpha,
        targets=roles,
        rslora=rslora,
        dora=bool(config.get("use_dora")),
        dropout=given.dropout or float(config["lora_dropout"]),
        adapters=None,
        rank_pattern={name: k for name, k in ranks.items() if k != rank},
        alpha_pattern={
            name: scales[name] * (math.sqrt(k) if rslora else k)
            for name, k in ranks.items()
            if not math.isclose(scales[name], resolved_scale(k, alpha, rslora), rel_tol=1e-12)
        },
    )
    check_given(given, resolved, folder / "adapter_config.json")
    return resolved, plan


def _reaches(
    layers: dict[str, tuple[nn.Module, str, list[tuple[int, int]]]], found: dict[str, list[Contribution]]
) -> bool:
    """Whether a role's slices hold rows some adapter changes."""
    return any(
        c.inside(*s)[0].any() for name, (_, _, slices) in layers.items() for c in found.get(name, []) for s in slices
    )


def _slice_rank(contributions: list[Contribution]) -> int:
    """The rank a slice needs: one adapter's when they share A, else their ranks summed (stacked)."""
    if all(torch.equal(c.a, contributions[0].a) for c in contributions):
        return contributions[0].a.shape[0]
    return sum(c.a.shape[0] for c in contributions)


def per_slice_scale(per_slice: list[list[Contribution]]) -> float:
    """The scale a layer takes: its first adapter's (others' B are rescaled to it)."""
    return next(c.scale for cs in per_slice for c in cs)


def resolved_scale(rank: int, alpha: float, rslora: bool) -> float:
    """LoRA's (or rsLoRA's) scale of a rank and alpha."""
    return alpha / math.sqrt(rank) if rslora else alpha / rank


def check_given(given: LoRAConfig, resolved: LoRAConfig, path: Path) -> None:
    """An option the folder sets, given another value on the command line, is an error naming both."""
    defaults = {f.name: f.default_factory() if callable(f.default_factory) else f.default for f in fields(LoRAConfig)}
    for name in LORA_FIELDS:
        value, theirs = getattr(given, name), getattr(resolved, name)
        ok = value == defaults[name] or value == theirs
        require(given, name, value, ok, f"{path} sets it ({theirs!r}): leave the option out, the adapters decide it")


def _take_whole(
    loaded: PeftAdapters,
    net: nn.Module,
    whole: dict[str, tuple[Tensor, str]],
    rules: dict[str, str],
    parts: dict[str, list[Part]],
    names: dict[str, str],
    folder: Path,
) -> None:
    """The tensors the file holds whole: modules_to_save load and train; a base layer's must be the network's."""
    params = dict(net.named_parameters(remove_duplicate=False))
    for key, (tensor, kind) in whole.items():
        part = next(p for p in parts[rules[key]] if p.key == key)
        name = names[rules[key]]
        mine = part.to_hf(params[name].detach())
        if tensor.shape != mine.shape:
            raise InteropError(
                f"{_file(folder)}: {PEFT_PREFIX}{key} has shape {tuple(tensor.shape)}, the network's "
                f"{tuple(mine.shape)} (a vocabulary the base lacks? train with the tokenizer saved with the adapters: "
                "--data.tokenizer FOLDER)"
            )
        if kind == "trained":
            loaded.whole[name] = (part.rows, part.from_hf(tensor))
            loaded.trained.append(name)
        elif not torch.equal(tensor.to(mine.dtype), mine):
            raise InteropError(
                f"{_file(folder)}: {PEFT_PREFIX}{key} holds base weights other than --model.init_from's; start from "
                "the base those adapters were trained on"
            )


def _file(folder: Path) -> Path:
    """The adapter file a message names."""
    found = folder / "adapter_model.safetensors"
    return found if found.is_file() else folder / "adapter_model.bin"
