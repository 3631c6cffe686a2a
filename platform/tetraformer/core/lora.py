"""LoRA: low-rank adapters on a network's Linear layers, chosen by role (attention q/k/v/o, feed-forward, head).

A LoRALinear is the Linear it replaces (same `weight` and `bias` tensors, so the state-dict names stay) plus, per
adapted slice of its output, A (rank x in, Kaiming-uniform) and B (slice x rank, zeros): a new adapter adds
nothing. The fused q/k/v projection of self-attention takes one adapter per adapted role, on its slice.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, field, fields
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.core.attention import Attention
from tetraformer.core.heads import ClassificationHead, LMHead, MaskedLMHead, TokenClassificationHead
from tetraformer.core.layers import FeedForward
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


@dataclass
class LoRAConfig:
    """Low-rank adapters: rank 0 means none (the whole network trains)."""

    rank: int = 0
    alpha: float = 16.0  # the adapters' output is scaled by alpha / rank
    dropout: float = 0.0  # on the adapters' input
    targets: list[Role] = field(default_factory=lambda: ["q", "k", "v", "o"])
    save: SaveMode = "adapters"  # checkpoints hold the adapters and a reference to the base, or merged weights

    def __post_init__(self) -> None:
        """Reject ranks, rates and roles the adapters cannot use: an OptionError names the field."""
        require(self, "rank", self.rank, self.rank >= 0, "must be 0 (no LoRA) or more")
        above(self, 0, alpha=self.alpha)
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
        """Whether the network gets adapters."""
        return self.rank > 0


class LoRALinear(nn.Linear):
    """A frozen Linear plus low-rank adapters on slices of its output: y = x W^T + b + scale * B_i A_i x."""

    def __init__(self, base: nn.Linear, slices: list[tuple[int, int]], cfg: LoRAConfig) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight, self.bias = base.weight, base.bias  # the same tensors: tied weights stay tied
        self.weight.requires_grad_(False)
        if self.bias is not None:
            self.bias.requires_grad_(False)
        self.slices, self.scale, self.merged, self.disabled = slices, cfg.alpha / cfg.rank, False, False
        kw = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_a = nn.ParameterList(torch.empty(cfg.rank, self.in_features, **kw) for _ in slices)
        self.lora_b = nn.ParameterList(torch.zeros(end - start, cfg.rank, **kw) for start, end in slices)
        for a in self.lora_a:
            nn.init.kaiming_uniform_(a, a=math.sqrt(5))  # as nn.Linear and PEFT initialise A
        self.lora_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        """The base projection plus each slice's adapter (none once merged)."""
        y = F.linear(x, self.weight, self.bias)
        if self.merged or self.disabled:
            return y
        h = self.lora_dropout(x) if self.training else x
        deltas = [F.linear(F.linear(h, a), b) * self.scale for a, b in zip(self.lora_a, self.lora_b, strict=True)]
        if self.slices == [(0, self.out_features)]:
            return y + deltas[0]
        bounds = sorted({0, self.out_features, *(s for pair in self.slices for s in pair)})
        parts = list(y.split([end - start for start, end in zip(bounds, bounds[1:], strict=False)], -1))
        for (start, _), delta in zip(self.slices, deltas, strict=True):
            index = bounds.index(start)  # slices do not overlap: each is one part
            parts[index] = parts[index] + delta
        return torch.cat(parts, -1)

    def delta_weight(self) -> Tensor:
        """The adapters' full-size weight update, computed in fp32 (out x in)."""
        delta = torch.zeros(self.out_features, self.in_features, device=self.weight.device, dtype=torch.float32)
        for (start, end), a, b in zip(self.slices, self.lora_a, self.lora_b, strict=True):
            delta[start:end] += (b.float() @ a.float()) * self.scale
        return delta

    def merge(self) -> None:
        """Fold the adapters into the weight (in fp32, then cast to its dtype); forward then skips them."""
        if not self.merged:
            with torch.no_grad():
                self.weight.copy_((self.weight.float() + self.delta_weight()).to(self.weight.dtype))
            self.merged = True

    def unmerge(self) -> None:
        """Take the adapters back out of the weight (exact in fp32; within rounding in lower precision)."""
        if self.merged:
            with torch.no_grad():
                self.weight.copy_((self.weight.float() - self.delta_weight()).to(self.weight.dtype))
            self.merged = False

    def extra_repr(self) -> str:
        """Shape, rank and the adapted slices."""
        return f"{super().extra_repr()}, rank={self.lora_a[0].shape[0]}, slices={self.slices}"


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
        setattr(owner, attr, LoRALinear(linear, sorted(slices), cfg))
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
            weight = layer.weight if layer.merged else (layer.weight.float() + layer.delta_weight())
            state[f"{prefix}weight"] = weight.detach().to(layer.weight.dtype)
    return {k: v for k, v in state.items() if ".lora_a." not in f".{k}" and ".lora_b." not in f".{k}"}


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
