"""Hugging Face checkpoints in and out: BERT, GPT-2, T5 and ViT load into the core with identical outputs."""

from tetraformer.interop.errors import InteropError
from tetraformer.interop.outputs import ModelOutput
from tetraformer.interop.registry import CONVERTERS, Converter, HFModel, load_hf, register, save_hf

__all__ = [
    "CONVERTERS",
    "Converter",
    "HFModel",
    "InteropError",
    "ModelOutput",
    "load_hf",
    "register",
    "save_hf",
]

from tetraformer.interop import bert, gpt2, t5, vit  # noqa: F401,E402  (registers converters)
