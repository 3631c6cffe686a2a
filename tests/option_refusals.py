"""Option refusals at the unit level: one config section parsed as the CLI parses it and built by its class, the
refusal worded by the platform's one-line functions (what `tetraformer fit` prints after `error: `)."""

from __future__ import annotations

import importlib
from argparse import ArgumentError
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import ActionConfigFile, Namespace
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.cli import LightningArgumentParser

from tetraformer.cli.config_errors import one_line
from tetraformer.cli.option_errors import (
    check_trainer_ranges,
    instantiation_error,
    told_in_one_line,
    trainer_option_error,
)
from tetraformer.cli.precision import PlatformTrainer
from tetraformer.errors import ConfigError
from tetraformer.training.reports.loggers import RunConfig

# How Lightning refuses a Trainer setting (as in TetraformerCLI.instantiate_trainer)
TRAINER_REFUSALS = (MisconfigurationException, ValueError, TypeError)


def task_sections(root: Path, task: str) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The task's tiny test config by section: (the class that takes the section's options, its values)."""
    config = importlib.import_module(f"tests.tasks.{task}.conftest").tiny_config(root, train_path=str(root / "t.txt"))
    model, data = (_class(config[key]["class_path"]) for key in ("model", "data"))
    return {
        "trainer": (PlatformTrainer, config["trainer"]),
        "model": (model, config["model"]["init_args"]),
        "data": (data, config["data"]["init_args"]),
        "run": (RunConfig, config["run"]),
    }


def _class(path: str) -> Any:
    """The class a config's `class_path` names."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def section_parser(owner: Any, section: str) -> LightningArgumentParser:
    """A parser of one config section's options as the CLI's parser types them, plus `--config` (a YAML string)."""
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_argument("--config", action=ActionConfigFile)
    parser.add_class_arguments(owner, section, fail_untyped=False)
    return parser


def build_section(parser: LightningArgumentParser, config: Namespace, section: str) -> None:
    """Build the section's class from its parsed options; a refusal raised as the CLI words it (a ConfigError)."""
    if section != "trainer":
        with told_in_one_line(lambda err: instantiation_error(err, config), ValueError):
            parser.instantiate(config)
        return
    trainer = config.trainer.as_dict()
    check_trainer_ranges(trainer)
    with told_in_one_line(lambda err: trainer_option_error(err, trainer), *TRAINER_REFUSALS):
        PlatformTrainer(**{**trainer, "logger": False})


class Refusals:
    """The one line with which options over a task's tiny test config are refused; parsers built once per section."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.parsers: dict[tuple[Any, str], LightningArgumentParser] = {}

    def line(self, task: str, args: list[str], option: str) -> str | None:
        """ARGS refused at parse time (jsonargparse's report as `one_line` tells it) or when OPTION's section is
        built, as the CLI words it; None when they are accepted."""
        section = option.removeprefix("--").partition(".")[0]
        owner, values = task_sections(self.root, task)[section]
        if (owner, section) not in self.parsers:
            self.parsers[owner, section] = section_parser(owner, section)
        parser = self.parsers[owner, section]
        try:
            config = parser.parse_args(["--config", yaml.safe_dump({section: values}), *args])
            build_section(parser, config, section)
        except ArgumentError as err:
            return one_line(str(err))
        except ConfigError as err:
            return str(err)
        return None
