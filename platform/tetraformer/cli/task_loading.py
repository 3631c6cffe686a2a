"""The task module of a checkpoint, as the commands load it: eval mode, a device, an optional tokenizer."""

from __future__ import annotations

from typing import Any

from tetraformer.data import load_tokenizer
from tetraformer.errors import TetraformerError
from tetraformer.training.base.text_generation import GenerativeTask
from tetraformer.training.checkpointing.loading import load_task_module


def load_generative_task(ckpt: str, tokenizer: str | None, device: str) -> Any:
    """A checkpoint's task, checked to generate text and to have a tokenizer (its own or `tokenizer`)."""
    task = load_task(ckpt, device, tokenizer)
    if not isinstance(task, GenerativeTask):
        raise TetraformerError(f"{ckpt}'s task ({type(task).__name__}) does not generate text")
    require_tokenizer(task, ckpt)
    return task


def load_task(ckpt: str, device: str, tokenizer: str | None = None) -> Any:
    """A checkpoint's task module in eval mode on `device`; `tokenizer` (folder or tokenizer.json) replaces its own."""
    task = load_task_module(ckpt, map_location=device)
    if tokenizer is not None:
        task.tokenizer = load_tokenizer(tokenizer)
    return task


def require_tokenizer(task: Any, ckpt: str) -> None:
    """A text command needs the task's tokenizer: an error saying how to give one when the checkpoint has none."""
    if task.tokenizer is None:
        raise TetraformerError(
            f"{ckpt} holds no tokenizer: pass --tokenizer DIR (a tokenizer.json or a Hugging Face tokenizer folder)"
        )
