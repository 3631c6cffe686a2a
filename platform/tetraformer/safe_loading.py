"""Loading checkpoints and weight files safely: tensors and plain data only, unless `--trust_checkpoint true`.

Unpickling arbitrary objects can run code, so every load takes `weights_only=True` (torch's restricted
unpickler). A file that needs more is refused in one line naming what it holds; `--trust_checkpoint true` (for
files you trust) loads it anyway. The CLI sets the policy once per command with `trusting_checkpoints`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pickle
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch

from tetraformer.errors import TetraformerError

log = logging.getLogger(__name__)
TRUST_FLAG = "--trust_checkpoint"
TRUST_HELP = (
    "load checkpoints and weight files that hold pickled Python objects (default false: tensors and plain data "
    "only). Read from the command line; unpickling can run code: only for files you trust"
)
TRUE_WORDS, FALSE_WORDS = ("true", "yes", "1"), ("false", "no", "0")
_TRUSTED: ContextVar[bool] = ContextVar("trust_checkpoint", default=False)


class UnsafeCheckpointError(TetraformerError):
    """A file holding pickled objects that a safe load refuses."""


# --- the policy ------------------------------------------------------------------------------------
@contextmanager
def trusting_checkpoints(trust: bool = True) -> Iterator[None]:
    """Within the block, loads accept pickled objects when `trust` (the CLI's --trust_checkpoint)."""
    token = _TRUSTED.set(trust)
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def checkpoints_trusted() -> bool:
    """Whether the running command was given --trust_checkpoint true."""
    return _TRUSTED.get()


def parse_bool(text: str) -> bool:
    """true/yes/1 or false/no/0, any case."""
    word = text.strip().lower()
    if word not in TRUE_WORDS + FALSE_WORDS:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return word in TRUE_WORDS


def trust_requested(argv: list[str]) -> bool:
    """The value of `--trust_checkpoint VALUE` / `--trust_checkpoint=VALUE` on a command line (the last wins)."""
    trust = False
    for i, arg in enumerate(argv):
        if arg == TRUST_FLAG and i + 1 < len(argv):
            trust = argv[i + 1].strip().lower() in TRUE_WORDS
        elif arg.startswith(TRUST_FLAG + "="):
            trust = arg.split("=", 1)[1].strip().lower() in TRUE_WORDS
    return trust


def add_trust_flag(parser: argparse.ArgumentParser) -> None:
    """Declare --trust_checkpoint on an argparse command (the policy itself is read from the command line)."""
    parser.add_argument(TRUST_FLAG, type=parse_bool, default=False, metavar="true|false", help=TRUST_HELP)


# --- loading ---------------------------------------------------------------------------------------
def load_torch_file(path: str | Path) -> Any:
    """torch.load of tensors and plain data; a file with pickled objects is refused unless trusted (then logged)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        objects = pickled_objects(path, err)
        if not objects:
            raise
        if not checkpoints_trusted():
            raise UnsafeCheckpointError(refusal(path, objects)) from None
        log.warning("%s: unpickling %s (%s true)", path, ", ".join(objects), TRUST_FLAG)
        return torch.load(path, map_location="cpu", weights_only=False)


def refusal(path: str | Path, objects: list[str]) -> str:
    """The one line telling what a refused file holds and how to load it anyway."""
    return (
        f"{path} holds pickled Python objects ({', '.join(objects)}) that a safe load (tensors and plain data "
        f"only) refuses: if you trust where the file comes from, load it anyway with {TRUST_FLAG} true "
        "(unpickling can run code)"
    )


def pickled_objects(path: str | Path, err: Exception | None = None) -> list[str]:
    """The classes and functions a torch file would unpickle beyond torch's allowlist ('module.name')."""
    try:
        return torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # noqa: BLE001 - not a zip checkpoint (legacy .bin): torch's refusal names the first one
        return re.findall(r"GLOBAL ([\w.]+)", str(err or ""))


@contextmanager
def trusted_objects_allowed(path: str | Path | None) -> Iterator[None]:
    """When trusted, let `weights_only=True` loads of `path` that another library hard-codes unpickle its objects."""
    with ExitStack() as stack:
        if checkpoints_trusted() and path is not None and Path(path).is_file():
            stack.enter_context(torch.serialization.safe_globals(_resolved(pickled_objects(path))))
        yield


def _resolved(names: list[str]) -> list[Any]:
    """The objects named 'module.name' (imported, as unpickling would)."""
    found = []
    for name in names:
        module, _, attribute = name.rpartition(".")
        try:
            found.append(getattr(importlib.import_module(module), attribute))
        except (ImportError, AttributeError):
            log.warning("%s: cannot import %s to allow it", TRUST_FLAG, name)
    return found
