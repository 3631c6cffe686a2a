"""Hugging Face checkpoints in and out: BERT, GPT-2, T5, ViT and the Llama family (Llama, Mistral, Qwen2, Qwen3)
load into the core with identical outputs.

The families are listed in `registry.FAMILY_MODULES` and imported when first asked for; Hugging Face model
directories are a source `init_from` reads because `tetraformer.payload.STARTING_POINTS` names
`registry.HF_MODEL_DIRECTORY`. Importing this package registers nothing.
"""

from tetraformer.interop.errors import InteropError
from tetraformer.interop.outputs import ModelOutput
from tetraformer.interop.registry import (
    FamilySpec,
    HFModel,
    architectures,
    export_class,
    families,
    load_hf,
    save_hf,
)

__all__ = [
    "FamilySpec",
    "HFModel",
    "InteropError",
    "ModelOutput",
    "architectures",
    "export_class",
    "families",
    "load_hf",
    "save_hf",
]
