"""A checkpoint belongs to one task: a `-c` config's model and data classes must be the checkpoint's.

Without this check `test -c CLASSIFIER.yaml --ckpt_path LM.ckpt` ran a language-model test on the classifier's
data (the checkpoint's model section wins in evaluation) and `fit` failed deep in Lightning's state_dict load.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from jsonargparse import Namespace

from tetraformer.cli.command_line import configured_class_path, configured_root, flag_value
from tetraformer.errors import ConfigError
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint

RUN_CHECKPOINTS = ("best", "last")  # ckpt_path values naming RUN_DIR/checkpoints/NAME.ckpt
LIGHTNING_CKPT_NAMES = ("hpc", "registry")  # ckpt_path values only Lightning resolves
SECTIONS = {"model": "hyper_parameters", "data": "datamodule_hyper_parameters"}  # config section: checkpoint key
ARCH = "init_args.arch."  # where a model section keeps the architecture
log = logging.getLogger(__name__)


def checkpoint_file(argv: list[str], required: bool) -> Path | None:
    """The file `--ckpt_path` names: a path as given, `last` / `best` as RUN_DIR/checkpoints/NAME.ckpt (RUN_DIR the
    configured default_root_dir; one that does not exist is an error when `required`); None when unset or a name
    only Lightning resolves (hpc, registry)."""
    ckpt_path = flag_value(argv, "--ckpt_path")
    if ckpt_path is None or ckpt_path in LIGHTNING_CKPT_NAMES:
        return None
    if ckpt_path not in RUN_CHECKPOINTS:
        return Path(ckpt_path)
    path = Path(configured_root(argv) or ".") / "checkpoints" / f"{ckpt_path}.ckpt"
    if required and not path.is_file():
        raise ConfigError(
            f"--ckpt_path {ckpt_path} names {path} (RUN_DIR/checkpoints/{ckpt_path}.ckpt of the configured "
            "--trainer.default_root_dir), which does not exist: give a checkpoint file, or the run's directory as "
            "--trainer.default_root_dir"
        )
    return path


def check_resumed_task(argv: list[str]) -> None:
    """`fit --ckpt_path FILE|last|best`: the checkpoint read safely (before Lightning's own load) and checked to be of
    the config's task. A file that is not there is left to Lightning (`last` before any last.ckpt: from scratch)."""
    path = checkpoint_file(argv, required=False)
    if path is not None and path.is_file():
        check_checkpoint_task(argv, path, read_checkpoint(path))


def check_checkpoint_task(argv: list[str], ckpt_path: Path, ckpt: dict[str, Any]) -> None:
    """A ConfigError when the command line's model or data class is not the checkpoint's (nor a subclass of it)."""
    for section in SECTIONS:
        stored = stored_class_path(ckpt, section)
        configured = configured_class_path(argv, section)
        if stored and configured and not same_task(configured, stored):
            raise ConfigError(
                f"--ckpt_path {ckpt_path} is a {task_name(stored)} checkpoint ({stored}); the config's {section} is "
                f"{configured}: {advice(argv[0], ckpt_path, task_name(configured))}"
            )


def stored_class_path(ckpt: dict[str, Any], section: str) -> str | None:
    """The class a checkpoint's model or data was: its saved hyper-parameters', else (model) its payload's."""
    stored = ckpt.get(SECTIONS[section], {}).get("_class_path")
    return stored or (ckpt[PAYLOAD_KEY].get("class_path") if section == "model" else None)


def advice(subcommand: str, ckpt_path: Path, task: str) -> str:
    """What to do instead: another checkpoint, or (fit) the checkpoint's weights as a starting point."""
    if subcommand == "fit":
        return f"resume from a {task} checkpoint, or start from this one's weights with --model.init_from {ckpt_path}"
    return f"use a {task} checkpoint or the checkpoint's own config (leave out -c)"


def task_name(class_path: str) -> str:
    """The task a class path belongs to: TASK of tasks.TASK.module.Class, else the class's name."""
    parts = class_path.split(".")
    return parts[1] if parts[0] == "tasks" and len(parts) > 2 else parts[-1]


def same_task(configured: str, stored: str) -> bool:
    """Whether a configured class can take a checkpoint of the stored one: one is the other or a subclass of it
    (compared by class name when either cannot be imported: a short name, which the parser resolves)."""
    classes = imported_class(configured), imported_class(stored)
    if classes[0] is None or classes[1] is None:
        return configured.rsplit(".", 1)[-1] == stored.rsplit(".", 1)[-1]
    return issubclass(classes[0], classes[1]) or issubclass(classes[1], classes[0])


def imported_class(class_path: str) -> type | None:
    """The class a dotted path names, or None (no module part, or nothing importable there)."""
    module_name, _, name = class_path.rpartition(".")
    if not module_name:
        return None
    try:
        found = getattr(importlib.import_module(module_name), name, None)
    except ImportError:
        return None
    return found if isinstance(found, type) else None


def check_resumed_model(asked: Namespace, stored: Namespace, ckpt_path: Path, laid_over: bool) -> None:
    """`fit --ckpt_path`: the model options the config sets (`asked`) against the checkpoint's (`stored`). Another
    architecture is a ConfigError (the weights fix it); other options the checkpoint's replace when Lightning lays
    them over the config (`laid_over`) get one warning line, instead of being dropped without a word."""
    mine, theirs = dict(asked.items()), dict(stored.items())
    changed = [key for key, value in mine.items() if key in theirs and theirs[key] != value]
    arch = [key for key in changed if key.startswith(ARCH)]
    if arch:
        raise ConfigError(
            f"{_changes(arch, mine, theirs)}: the architecture of a resumed run comes from its checkpoint "
            f"{ckpt_path}; to change it, start a new run from its weights with --model.init_from {ckpt_path}"
        )
    if changed and laid_over:
        log.warning(
            "%s: a resumed run takes its model options from its checkpoint %s; to change them, start a new run "
            "from its weights with --model.init_from %s",
            _changes(changed, mine, theirs),
            ckpt_path,
            ckpt_path,
        )


def _changes(keys: list[str], mine: dict[str, Any], theirs: dict[str, Any]) -> str:
    """`--model.arch.d_model 32 (the checkpoint's: 64), ...` for model section keys."""
    flags = [f"--model.{key.removeprefix('init_args.')} {mine[key]} (the checkpoint's: {theirs[key]})" for key in keys]
    return ", ".join(flags)
