"""A value its option does not allow, told in one line that names the option as the command line spells it.

Classes check their own options (an OptionError names the field); jsonargparse wraps what a class raises while it
builds the config, and Lightning checks some Trainer settings itself: here both become `--section.option VALUE:
what it allows`. Errors that name no option the user set are left alone, so real bugs keep their traceback.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jsonargparse import Namespace
from lightning.pytorch import Trainer

from tetraformer.cli.config_errors import trainer_config_error
from tetraformer.errors import ConfigError, OptionError, TetraformerError

TRAINER_DEFAULTS = {
    name: p.default for name, p in inspect.signature(Trainer.__init__).parameters.items() if name != "self"
}
# Trainer options Lightning takes without a check at construction (it fails mid-run, or quietly does something else)
TRAINER_RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "min_epochs": (lambda v: v >= 0, "must be 0 or more"),
    "min_steps": (lambda v: v >= 0, "must be 0 or more"),
    "val_check_interval": (lambda v: v > 0, "must be more than 0: a share of an epoch up to 1.0, or a batch count"),
    "check_val_every_n_epoch": (lambda v: v >= 1, "must be 1 or more, or null (count batches across epochs)"),
    "num_sanity_val_steps": (lambda v: v >= -1, "must be 0 or more, or -1 (every validation batch)"),
    "log_every_n_steps": (lambda v: v >= 0, "must be 0 or more (0: no step logging)"),
    "accumulate_grad_batches": (lambda v: v >= 1, "must be 1 or more"),
    "gradient_clip_val": (lambda v: v >= 0, "must be 0 or more (0 or null: no clipping)"),
}


@contextmanager
def told_in_one_line(explain: Callable[[Exception], Exception | None], *kinds: type[Exception]) -> Iterator[None]:
    """Inside: an error of `kinds` that `explain` finds to be the user's is raised as its one-line error instead; any
    other error (`explain` gives None) goes on as it was, with its traceback."""
    try:
        yield
    except kinds as err:
        explained = explain(err)
        if explained is None or explained is err:
            raise
        raise explained from err


def instantiation_error(err: BaseException, config: Namespace) -> TetraformerError | None:
    """The user's mistake behind an error raised while the config's classes were built, an OptionError's option
    named as on the command line; None when no TetraformerError caused it."""
    found = user_error(err)
    if isinstance(found, OptionError):
        return ConfigError(f"{option_flag(found, config)} {found.value!r}: {found.allowed}")
    return found


def user_error(err: BaseException | None) -> TetraformerError | None:
    """The TetraformerError at the root of `err`'s causes (jsonargparse re-raises a class's error from it)."""
    while err is not None:
        if isinstance(err, TetraformerError):
            return err
        err = err.__cause__
    return None


def option_flag(err: OptionError, config: Namespace) -> str:
    """`--model.arch.n_heads`: the key named like the option, in the section whose keys are the owner's parameters
    (then holding the refused value); the bare option name when the config has none."""
    owner = {
        name
        for name, p in inspect.signature(err.owner).parameters.items()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }

    def fit(key: str) -> tuple[bool, bool]:
        section = key.rpartition(".")[0]
        siblings = set(vars(config.get(section) if section else config))
        return owner <= siblings, config.get(key) == err.value

    keys = [key for key, _ in config.items() if key.rpartition(".")[2] == err.option]
    best = max(keys, key=fit, default=err.option)
    return "--" + best.replace(".init_args.", ".")


def check_trainer_ranges(trainer: dict[str, Any]) -> None:
    """Refuse the TRAINER_RANGES values Lightning would take without a word."""
    for name, (ok, allowed) in TRAINER_RANGES.items():
        value = trainer.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and not ok(value):
            raise ConfigError(f"--trainer.{name} {value!r}: {allowed}")


def trainer_option_error(err: Exception, trainer: dict[str, Any]) -> ConfigError | None:
    """Lightning's refusal of a Trainer setting as one line naming the option: the first option set away from its
    default that the message names (else whose string value it quotes); None when it names none of them. The
    refusals config_errors words with their remedy (FSDP on a CPU, a validation interval beyond an epoch) first."""
    specific = trainer_config_error(err) if isinstance(err, ValueError) else None
    if specific is not None:
        return specific
    message = " ".join(str(err).replace("`", "").split())
    chosen = {name: value for name, value in trainer.items() if TRAINER_DEFAULTS.get(name, value) != value}
    named = []
    for name, value in chosen.items():
        match = re.search(rf"(?<![\w.]){name}\b", message)
        if match or (isinstance(value, str) and repr(value) in message):
            named.append((not match, match.start() if match else message.find(repr(value)), name))
    if not named:
        return None
    name = min(named)[2]
    if re.match(r"[A-Z][a-z]* ", message):  # "You selected ...", not "Timer(duration=...)"
        message = message[:1].lower() + message[1:]
    return ConfigError(f"--trainer.{name} {chosen[name]!r}: {message}")


def check_init_from(init_from: str | None) -> None:
    """A fit's `--model.init_from` names a file or folder that is there: told before the data is read (with the
    tokenizer of that source), not as a missing checkpoint from deep inside it."""
    if init_from and not Path(init_from).exists():
        raise ConfigError(
            f"--model.init_from {init_from}: no such file or folder; give a Tetraformer checkpoint (.ckpt), a Hugging "
            "Face model folder or pkg:PACKAGE/path"
        )


def run_folder(path: str | Path, option: str) -> Path:
    """The folder an option names, created with its parents; a ConfigError naming the option when it cannot be."""
    why = _cannot_create(Path(path))
    if why:
        raise ConfigError(f"{option} {path}: {why}; give a folder that can be created")
    return Path(path)


def output_file(path: Path, option: str) -> Path:
    """A file an option names for writing, its folder created; a ConfigError naming the option when the path is a
    folder or its folder cannot be made."""
    why = f"{path} is a folder" if path.is_dir() else _cannot_create(path.parent)
    if why:
        raise ConfigError(f"{option} {path}: {why}; give a file path in a folder that can be created")
    return path


def _cannot_create(folder: Path) -> str | None:
    """Create a folder with its parents; why it cannot be, or None once it exists."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
        return f"{blocker} is a file, not a folder" if blocker else f"cannot create {folder} ({err.strerror})"
    return None
