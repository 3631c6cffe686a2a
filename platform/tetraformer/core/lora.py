"""LoRA: low-rank adapters on a network's Linear layers, chosen by role (attention q/k/v/o, feed-forward, head).

The layers are LoRALinear (core/lora_layer.py): the Linear they replace plus per-slice adapters, rsLoRA's scale
alpha / sqrt(rank) or LoRA's alpha / rank, and DoRA's magnitudes. Ranks and alphas may differ per layer, matched by
name as PEFT's rank_pattern and alpha_pattern are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, field, fields
from typing import Literal, get_args

from torch import Tensor, nn

from tetraformer.core.attention import Attention
from tetraformer.core.heads import ClassificationHead, LMHead, MaskedLMHead, TokenClassificationHead
from tetraformer.core.layers import FeedForward
from tetraformer.core.lora_layer import LoRALinear
from tetraformer.errors import ConfigError, above, probability, require

Role = Literal["q", "k", "v", "o", "ff_in", "ff_out", "head"]
ROLES: tuple[str, ...] = get_args(Role)
HEADS = (LMHead, MaskedLMHead, ClassificationHead, TokenClassificationHead)
# role -> (module class, Linear attribute, which output slice: 0, 1, 2 of the fused projection, None for all)
ROLE_TABLE: dict[str, list[tuple[type[nn.Module], str, int | None]]] = {
    "q": [(Attention, "qkv", 0), (Attention, "q", None)],
    "k": [(Attention, "qkv", 1), (Attention, "kv", 0)],
    "v": [(Attention, "qkv", 2), (Attention, "kv", 1)],
    "o": [(Attention, "out", None)],
    "ff_in": [(FeedForward, "up", None)],
    "ff_out": [(FeedForward, "down", None)],
}
SaveMode = Literal["adapters", "merged"]
ADAPTER_TENSORS = ("lora_a", "lora_b", "lora_m")  # a LoRALinear's own parameter lists


@dataclass
class LoRAConfig:
    """Low-rank adapters: rank 0 means none (the whole network trains)."""

    rank: int = 0
    alpha: float = 16.0  # the adapters' output is scaled by alpha / rank (alpha / sqrt(rank) with rslora)
    dropout: float = 0.0  # on the adapters' input
    targets: list[Role] = field(default_factory=lambda: ["q", "k", "v", "o"])
    save: SaveMode = "adapters"  # checkpoints hold the adapters and a reference to the base, or merged weights
    rslora: bool = False  # rank-stabilised LoRA: scale by alpha / sqrt(rank) instead of alpha / rank
    dora: bool = False  # DoRA: a trained magnitude per output row over the adapted weight's direction
    adapters: str | None = None  # a PEFT adapter folder to start from: its adapter_config.json sets the rest
    rank_pattern: dict[str, int] = field(default_factory=dict)  # layer name (or its end) -> rank, as PEFT's
    alpha_pattern: dict[str, float] = field(default_factory=dict)  # layer name (or its end) -> alpha, as PEFT's

    def __post_init__(self) -> None:
        """Reject ranks, rates and roles the adapters cannot use: an OptionError names the field."""
        require(self, "rank", self.rank, self.rank >= 0, "must be 0 (no LoRA) or more")
        above(self, 0, alpha=self.alpha)
        bad_ranks = {k: v for k, v in self.rank_pattern.items() if int(v) < 1}
        require(self, "rank_pattern", self.rank_pattern, not bad_ranks, "ranks must be 1 or more")
        bad_alphas = {k: v for k, v in self.alpha_pattern.items() if float(v) <= 0}
        require(self, "alpha_pattern", self.alpha_pattern, not bad_alphas, "alphas must be more than 0")
        probability(self, dropout=self.dropout)
        unknown = [t for t in self.targets if t not in ROLES]
        require(self, "targets", self.targets, not unknown and bool(self.targets), f"must be some of {list(ROLES)}")
        require(self, "save", self.save, self.save in get_args(SaveMode), f"must be one of {list(get_args(SaveMode))}")
        if not self.enabled:
            self._refuse_unused_options()

    def _refuse_unused_options(self) -> None:
        """Rank 0 trains the whole network: a LoRA option set away from its default then does nothing, so it is a
        mistake (the user meant LoRA), not a setting to drop without a word."""
        for option in fields(self):
            value = getattr(self, option.name)
            default = option.default_factory() if option.default is MISSING else option.default
            require(
                self,
                option.name,
                value,
                option.name == "rank" or value == default,
                "set while --model.lora.rank is 0 (rank 0: no adapters, the whole network trains); turn LoRA on "
                "with --model.lora.rank 8 (or another rank above 0), or leave the LoRA options out",
            )

    @property
    def enabled(self) -> bool:
        """Whether the network gets adapters (a rank, or a PEFT folder whose config gives one)."""
        return self.rank > 0 or self.adapters is not None

    def layer_rank(self, name: str) -> tuple[int, float]:
        """(rank, alpha) of the layer `name`: the first pattern matching it (its whole name or a dotted end, as
        PEFT matches), else the global rank and alpha."""
        rank = pattern_value(self.rank_pattern, name, self.rank)
        return int(rank), float(pattern_value(self.alpha_pattern, name, self.alpha))

    def scale(self, rank: int, alpha: float) -> float:
        """The adapters' output scale: alpha / sqrt(rank) with rsLoRA, else alpha / rank."""
        return alpha / math.sqrt(rank) if self.rslora else alpha / rank


def pattern_value(patterns: dict[str, float], name: str, default: float) -> float:
    """The value of the first pattern naming a layer (its whole name, or an end after a dot: PEFT's rank_pattern
    and alpha_pattern match, `(.*\\.)?(pattern)$`), else the default."""
    return next((v for k, v in patterns.items() if re.match(rf"(.*\.)?({k})$", name)), default)


def _fused_slices(owner: nn.Module, linear: nn.Linear, attr: str) -> list[tuple[int, int]]:
    """Output slices of a fused projection: q | k | v (k and v split the rest evenly, as with fewer KV heads)."""
    if attr == "kv":
        half = linear.out_features // 2
        return [(0, half), (half, linear.out_features)]
    q = owner.n_heads * owner.head_dim
    kv = (linear.out_features - q) // 2
    return [(0, q), (q, q + kv), (q + kv, linear.out_features)]


def targeted_linears(model: nn.Module, targets: list[str]) -> dict[str, tuple[nn.Module, str, list[tuple[int, int]]]]:
    """Linear layers the roles name: module name -> (owner, attribute, output slices to adapt)."""
    found: dict[str, tuple[nn.Module, str, list[tuple[int, int]]]] = {}
    for name, owner in model.named_modules():
        for role in targets:
            for cls, attr, part in ROLE_TABLE.get(role, []):
                linear = getattr(owner, attr, None) if isinstance(owner, cls) else None
                if isinstance(linear, nn.Linear):
                    whole = [(0, linear.out_features)]
                    span = whole if part is None else [_fused_slices(owner, linear, attr)[part]]
                    key = f"{name}.{attr}" if name else attr
                    found.setdefault(key, (owner, attr, []))[2].extend(span)
        if "head" in targets and isinstance(owner, HEADS):
            for sub, linear in owner.named_modules():
                if isinstance(linear, nn.Linear) and sub:
                    parent_name, _, attr = f"{name}.{sub}".rpartition(".")
                    found[f"{name}.{sub}"] = (model.get_submodule(parent_name), attr, [(0, linear.out_features)])
    return found


def apply_lora(model: nn.Module, cfg: LoRAConfig) -> list[str]:
    """Freeze every parameter, replace the targeted Linear layers by LoRALinear; the adapted layers' names."""
    model.requires_grad_(False)
    tied = _shared_weights(model)
    found = targeted_linears(model, list(cfg.targets))
    if not found:
        raise ConfigError(f"--model.lora.targets {list(cfg.targets)}: {type(model).__name__} has no such layers")
    for key, (owner, attr, slices) in found.items():
        linear = getattr(owner, attr)
        if id(linear.weight) in tied:
            raise ConfigError(
                f"--model.lora.targets: {key} shares its weight with the token embedding (tied), so its adapter "
                "cannot be merged; leave 'head' out of the targets"
            )
        rank, alpha = cfg.layer_rank(key)
        layer = LoRALinear(linear, sorted(slices), rank, cfg.scale(rank, alpha), cfg.dropout, cfg.dora)
        setattr(owner, attr, layer)
    return sorted(found)


def _shared_weights(model: nn.Module) -> set[int]:
    """ids of parameters that appear under more than one name (tied weights)."""
    seen: dict[int, int] = {}
    for _, param in model.named_parameters(remove_duplicate=False):
        seen[id(param)] = seen.get(id(param), 0) + 1
    return {i for i, n in seen.items() if n > 1}


def lora_layers(model: nn.Module) -> Iterator[LoRALinear]:
    """The network's LoRALinear layers."""
    return (m for m in model.modules() if isinstance(m, LoRALinear))


@contextmanager
def lora_disabled(model: nn.Module) -> Iterator[None]:
    """Run the network as its base: every (unmerged) adapter skipped, no second copy of the weights."""
    layers = list(lora_layers(model))
    if any(layer.merged for layer in layers):
        raise ValueError("lora_disabled: merged adapters are part of the weights; unmerge them first")
    for layer in layers:
        layer.disabled = True
    try:
        yield
    finally:
        for layer in layers:
            layer.disabled = False


def merge_lora(model: nn.Module) -> None:
    """Fold every adapter into its weight (fp32 arithmetic, cast back)."""
    for layer in lora_layers(model):
        layer.merge()


def unmerge_lora(model: nn.Module) -> None:
    """Take every merged adapter back out of its weight."""
    for layer in lora_layers(model):
        layer.unmerge()


def merged_state(model: nn.Module) -> dict[str, Tensor]:
    """The network's state dict as a plain network holds it: adapters folded into the weights, their tensors gone."""
    state = model.state_dict()
    for name, layer in model.named_modules():
        if isinstance(layer, LoRALinear):
            prefix = f"{name}." if name else ""
            weight = layer.weight if layer.merged else layer.merged_weight()
            state[f"{prefix}weight"] = weight.detach().to(layer.weight.dtype)
    return {k: v for k, v in state.items() if not is_adapter_key(k)}


def is_adapter_key(key: str) -> bool:
    """Whether a state-dict key is an adapter's tensor (A, B or a DoRA magnitude), not the network's."""
    return any(f".{name}." in f".{key}" for name in ADAPTER_TENSORS)


def parameter_counts(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameters, tied weights counted once."""
    params = {id(p): p for p in model.parameters()}.values()
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def strip_lora(model: nn.Module) -> list[str]:
    """Merge every adapter and put a plain nn.Linear (the same tensors) back in its place; the layers' names."""
    names = []
    for name, layer in list(model.named_modules()):
        if isinstance(layer, LoRALinear):
            layer.merge()
            plain = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None, device="meta")
            plain.weight, plain.bias = layer.weight, layer.bias
            parent, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent), attr, plain)
            names.append(name)
    return names
