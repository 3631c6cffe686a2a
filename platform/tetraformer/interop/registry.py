"""load_hf / save_hf: dispatch on config.json's `architectures` to the family converter that handles it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor, nn

from tetraformer.interop.errors import InteropError
from tetraformer.interop.files import read_config, read_weights, write_model_dir


class HFModel(nn.Module):
    """A core model behind Hugging Face's input names; `forward(**hf_inputs)` returns a ModelOutput."""

    architecture: str = ""

    def __init__(self, core: nn.Module, hf_config: dict, tokenizer_dir: Path | None = None) -> None:
        super().__init__()
        self.core, self.hf_config, self.tokenizer_dir = core, hf_config, tokenizer_dir


@dataclass(frozen=True)
class Converter:
    """How one Hugging Face architecture maps to the core and back."""

    architecture: str  # e.g. "GPT2LMHeadModel"
    load: Callable[[dict, dict[str, Tensor], str], HFModel]  # (hf config, hf weights, source) -> model
    save: Callable[[HFModel], tuple[dict, dict[str, Tensor]]]  # model -> (hf config, hf weights)


CONVERTERS: dict[str, Converter] = {}


def register(*converters: Converter) -> None:
    """Make architectures loadable and savable."""
    for converter in converters:
        CONVERTERS[converter.architecture] = converter


def _converter(architecture: str, source: str) -> Converter:
    """The converter of an architecture, or an error listing the supported ones."""
    if architecture not in CONVERTERS:
        raise InteropError(
            f"{source}: unsupported architecture {architecture!r}; supported: {sorted(CONVERTERS)}"
        )
    return CONVERTERS[architecture]


def load_hf(path: str | Path) -> HFModel:
    """Our model for the class named in config.json's `architectures`, in eval mode, with HF's outputs."""
    config = read_config(path)
    names = config.get("architectures") or []
    if not names:
        raise InteropError(f"{path}/config.json names no `architectures`; cannot tell which class to build")
    model = _converter(names[0], str(path)).load(config, read_weights(path), str(path))
    model.tokenizer_dir = Path(path)
    return model.eval()


def save_hf(model: HFModel, path: str | Path) -> Path:
    """Write a directory that `transformers` loads with the matching AutoModel class (tokenizer files copied)."""
    config, weights = _converter(model.architecture, type(model).__name__).save(model)
    return write_model_dir(
        path, {**config, "architectures": [model.architecture]}, weights, model.tokenizer_dir
    )
