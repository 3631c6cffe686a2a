"""Hugging Face checkpoints in and out: BERT, GPT-2, T5, ViT and the Llama family (Llama, Mistral, Qwen2, Qwen3)
load into the core with identical outputs.

Importing this package registers the five families and makes Hugging Face model directories a source
that `init_from` reads (tetraformer.payload.STARTING_POINTS).
"""

from tetraformer.interop.errors import InteropError
from tetraformer.interop.outputs import ModelOutput
from tetraformer.interop.registry import (
    FAMILIES,
    FamilySpec,
    HFModel,
    architectures,
    export_class,
    load_hf,
    register,
    save_hf,
)

__all__ = [
    "FAMILIES",
    "FamilySpec",
    "HFModel",
    "InteropError",
    "ModelOutput",
    "architectures",
    "export_class",
    "load_hf",
    "register",
    "save_hf",
]

from tetraformer.interop import bert, gpt2, llama, t5, vit  # noqa: F401,E402  (registers the families)
