"""What a Lightning subcommand's arguments set before the parser reads them: flags, `-c` files, their sections."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

CLASS_NAME = re.compile(r"^[A-Za-z_][\w.]*$")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def flag_value(argv: list[str], flag: str) -> str | None:
    """Value of `--flag value` or `--flag=value`, if present (the last one wins, as in the parser)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def split_configs(args: list[str]) -> tuple[list[str], list[str]]:
    """(the `-c FILE` / `--config FILE` / `--config=FILE` arguments in order, every other argument in order)."""
    configs: list[str] = []
    flags: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in ("-c", "--config") and i + 1 < len(args):
            configs += args[i : i + 2]
            i += 2
            continue
        (configs if args[i].startswith("--config=") else flags).append(args[i])
        i += 1
    return configs, flags


def config_files(argv: list[str]) -> list[Path]:
    """The `-c` / `--config` files of a command line (after its subcommand), in order."""
    configs, _ = split_configs(argv[1:])
    files: list[Path] = []
    i = 0
    while i < len(configs):
        if configs[i].startswith("--config="):
            files.append(Path(configs[i].split("=", 1)[1]))
            i += 1
        else:
            files.append(Path(configs[i + 1]))
            i += 2
    return files


def loaded_configs(argv: list[str]) -> list[dict[str, Any]]:
    """The `-c` files as read, in order. A file the parser will refuse (missing, not YAML, not a mapping) is left
    out: the parser says what is wrong with it."""
    loaded = []
    for config in config_files(argv):
        try:
            content = yaml.safe_load(config.read_text()) if config.is_file() else None
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(content, dict):
            loaded.append(content)
    return loaded


def configured_root(argv: list[str]) -> str | None:
    """`--trainer.default_root_dir` from the command line, else from the last `-c` file that sets it."""
    root = flag_value(argv, "--trainer.default_root_dir")
    if root is not None:
        return root
    for config in reversed(loaded_configs(argv)):
        trainer = config.get("trainer")
        if isinstance(trainer, dict) and trainer.get("default_root_dir"):
            return str(trainer["default_root_dir"])
    return None


def configured_class_path(argv: list[str], section: str) -> str | None:
    """The class path (or name) a command line gives a section (model, data): its flags', else its `-c` files'."""
    for value in (flag_value(argv, f"--{section}.class_path"), flag_value(argv, f"--{section}")):
        if is_class_path(value):
            return value
    for config in reversed(loaded_configs(argv)):
        entry = config.get(section)
        class_path = entry.get("class_path") if isinstance(entry, dict) else entry
        if is_class_path(class_path):
            return class_path
    return None


def is_class_path(value: Any) -> bool:
    """Whether a section's value names a class (a dotted path or a name), not a config file or a JSON value."""
    return isinstance(value, str) and bool(CLASS_NAME.match(value)) and not value.endswith(CONFIG_SUFFIXES)
