"""One registry of Hugging Face families: load_hf, save_hf and the export of core networks all dispatch here.

Each family file (bert, gpt2, llama, t5, vit) has the same shape: `config_from_hf` / `config_to_hf`, its tensor
rules, one HFModel class per architecture (head), a `load(cls, hf_config, weights, source)` function, and
one `FamilySpec` named SPEC, listed in FAMILY_MODULES.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from torch import Tensor, nn

from tetraformer.core.config import TransformerConfig
from tetraformer.interop.errors import InteropError
from tetraformer.interop.files import read_config, read_weights, write_model_dir
from tetraformer.interop.mapping import Rule
from tetraformer.payload import StartingPoint, StartingPointSource


class HFModel(nn.Module):
    """A core model behind Hugging Face's input names; `forward(**hf_inputs)` returns a ModelOutput."""

    architecture: str = ""

    def __init__(self, core: nn.Module, hf_config: dict, tokenizer_dir: Path | None = None) -> None:
        super().__init__()
        self.core, self.hf_config, self.tokenizer_dir = core, hf_config, tokenizer_dir

    @classmethod
    def from_network(cls, net: nn.Module, hf_config: dict, tokenizer_dir: Path | None = None) -> HFModel:
        """This class around a core network to export (head classes unwrap task networks)."""
        return cls(net, hf_config, tokenizer_dir)

    def export_config(self) -> dict:
        """config.json entries for this model (the registry adds `architectures`)."""
        raise NotImplementedError

    def export_weights(self) -> dict[str, Tensor]:
        """This model's tensors under Hugging Face's names."""
        raise NotImplementedError

    def export_rules(self) -> list[Rule]:
        """The rules export_weights writes this model's tensors by (what else it does to them, it does after)."""
        raise NotImplementedError


Loader = Callable[[type[HFModel], dict, dict[str, Tensor], str], HFModel]  # (class, config, weights, source)
# what exports as an architecture: a core network type, or a task network type on one backbone type
ExportKey = type[nn.Module] | tuple[type[nn.Module], type[nn.Module]]


@dataclass(frozen=True)
class ExportChoice:
    """Several architectures one network type may export as: `pick` says which for a network (None: not this family)."""

    architectures: tuple[str, ...]
    pick: Callable[[nn.Module], str | None]


ExportAs = str | ExportChoice  # the architecture a network of that type exports as, or a choice among several


@dataclass(frozen=True)
class FamilySpec:
    """One Hugging Face model family: its configs both ways, its heads, how they load, what exports as it."""

    name: str  # e.g. "BERT"
    config_from_hf: Callable[..., TransformerConfig]  # (config.json, source, ...) -> core config
    config_to_hf: Callable[..., dict]  # (core config, original config.json, ...) -> config.json entries
    heads: tuple[type[HFModel], ...]  # one class per architecture, named by its `architecture`
    load: Loader
    exports: dict[ExportKey, ExportAs] = field(default_factory=dict)  # network type (on backbone type) -> architecture

    def head(self, architecture: str) -> type[HFModel]:
        """The class of one of this family's architectures."""
        return next(c for c in self.heads if c.architecture == architecture)


# The families, by module: each `tetraformer.interop.<name>` defines its FamilySpec as SPEC. An explicit list read
# when a family is first asked for, so what loads and exports never depends on which modules someone imported.
FAMILY_MODULES: tuple[str, ...] = ("bert", "gpt2", "llama", "t5", "vit")


@functools.cache
def families() -> dict[str, FamilySpec]:
    """Every family of FAMILY_MODULES by name (imported on first use)."""
    specs = [importlib.import_module(f"tetraformer.interop.{name}").SPEC for name in FAMILY_MODULES]
    return {spec.name: spec for spec in specs}


def architectures() -> dict[str, FamilySpec]:
    """Every supported architecture and the family it belongs to."""
    return {c.architecture: spec for spec in families().values() for c in spec.heads}


def family_of(architecture: str, source: str) -> FamilySpec:
    """The family of an architecture, or an error listing the supported ones."""
    known = architectures()
    if architecture not in known:
        raise InteropError(f"{source}: unsupported architecture {architecture!r}; supported: {sorted(known)}")
    return known[architecture]


def export_class(net: nn.Module) -> type[HFModel]:
    """The HFModel class a core network is written as, or an error listing the exportable network types.

    A task network on a backbone (a classifier on a text or an image encoder) is looked up with its
    backbone's type first, then alone; a family whose export is an ExportChoice asks it (a causal LM with
    rotary positions is a Llama-family model, one with a learned table a GPT-2).
    """
    backbone = getattr(net, "backbone", None)
    keys: list[ExportKey] = [(type(net), type(backbone))] if isinstance(backbone, nn.Module) else []
    for key in [*keys, type(net)]:
        for spec in families().values():
            architecture = spec.exports.get(key)
            architecture = architecture.pick(net) if isinstance(architecture, ExportChoice) else architecture
            if architecture is not None:
                return spec.head(architecture)
    known = ", ".join(dict.fromkeys(export_name(key) for spec in families().values() for key in spec.exports))
    raise InteropError(
        f"no Hugging Face export for this {export_name(keys[0] if keys else type(net))} network (exportable: {known})"
    )


def export_name(key: ExportKey) -> str:
    """How a user reads an export key: `SequenceClassifier on ImageEncoder`, or the network type alone."""
    return f"{key[0].__name__} on {key[1].__name__}" if isinstance(key, tuple) else key.__name__


def load_hf(path: str | Path) -> HFModel:
    """Our model for the class named in config.json's `architectures`, in eval mode, with HF's outputs."""
    config = read_config(path)
    names = config.get("architectures") or []
    if not names:
        raise InteropError(f"{path}/config.json names no `architectures`; cannot tell which class to build")
    spec = family_of(names[0], str(path))
    model = spec.load(spec.head(names[0]), config, read_weights(path), str(path))
    model.tokenizer_dir = Path(path)
    return model.eval()


def save_hf(model: HFModel, path: str | Path) -> Path:
    """Write a directory that `transformers` loads with the matching AutoModel class (tokenizer files copied)."""
    spec = family_of(model.architecture, type(model).__name__)
    if not isinstance(model, spec.heads):
        raise InteropError(f"{type(model).__name__} is not a {spec.name} model")
    config = {**model.export_config(), "architectures": [model.architecture]}
    return write_model_dir(path, config, model.export_weights(), model.tokenizer_dir)


def hf_starting_point(path: Path) -> StartingPoint:
    """(config, weights) of the core network inside a Hugging Face model directory."""
    core = load_hf(path).core
    return core.cfg, core.state_dict()


HF_MODEL_DIRECTORY = StartingPointSource(  # listed in tetraformer.payload.STARTING_POINTS
    name="a Hugging Face model directory (config.json and weights)",
    accepts=lambda path: (path / "config.json").is_file(),
    load=hf_starting_point,
)
