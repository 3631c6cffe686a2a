"""A config or command-line mistake told in one line (a ConfigError) instead of jsonargparse's nested report."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tetraformer.errors import ConfigError

_PARSER_KEY = re.compile(r'^Parser key "([^"]+)":\s*(.*)$')
_LITERAL = re.compile(r"^Expected a typing\.Literal\[(.*)\]\. Got value: (.*)$")
_TYPE = re.compile(r"^Expected a <class '(\w+)'>\. Got value: (.*)$")
_UNKNOWN_OPTION = re.compile(r"^Option '([^']+)' is not accepted$")
_LITERALS = re.compile(r"Literal\[([^\]]*)\]")
_CLASSES = re.compile(r"<class '(?:[\w.]*\.)?(\w+)'>")
_VAL_INTERVAL = re.compile(
    r"`val_check_interval` \((\d+)\) must be less than or equal to the number of the training batches \((\d+)\)"
)
_FSDP_NEEDS_GPU = re.compile(r"The strategy `fsdp` requires a GPU accelerator, but received `accelerator='?(\w+)'?`")
_STRUCTURE = (
    "Does not validate against any of the Union subtypes",
    "Subtypes:",
    "Errors:",
    "Problem with given class_path",
    "Expected a <class 'NoneType'>",
    "Given value",
)


def one_line(report: str) -> str:
    """The innermost reason of a jsonargparse error report, prefixed with the dotted option it concerns."""
    keys: list[str] = []
    lines = report.splitlines()
    for index, raw in enumerate(lines):
        line = raw.strip().removeprefix("- ").strip()
        match = _PARSER_KEY.match(line)
        if match:
            keys.append(match.group(1))
            line = match.group(2)
        if line.startswith("Subtypes:") and _only_type_mismatches(_block(lines, index)):
            return f"--{'.'.join(keys)}: {_union_choices(line, _block(lines, index))}"
        if line and not line.startswith(_STRUCTURE):
            return _explain(keys, line)
    return report.strip().splitlines()[0] if report.strip() else "invalid configuration"


def _block(lines: list[str], start: int) -> list[str]:
    """The report's lines from `start` on that are indented at least as deep (one Union's part of the report)."""
    depth = len(lines[start]) - len(lines[start].lstrip())
    end = next((i for i in range(start + 1, len(lines)) if len(lines[i]) - len(lines[i].lstrip()) < depth), len(lines))
    return lines[start:end]


def _only_type_mismatches(block: list[str]) -> bool:
    """Whether every member of a Union refused the value for its type alone (no deeper reason to tell)."""
    errors = [line.strip()[2:] for line in block if line.strip().startswith("- ")]
    return bool(errors) and all(error.startswith("Expected a ") for error in errors)


def _union_choices(subtypes: str, block: list[str]) -> str:
    """What a Union takes, from its `Subtypes: [...]` line: its Literal values and its types."""
    given = next((line.strip()[len("Given value: ") :] for line in block if "Given value: " in line), None)
    value = repr(given) if given is not None else "the value"
    values = [v.strip().strip("'\"") for group in _LITERALS.findall(subtypes) for v in group.split(",")]
    types = [t for t in _CLASSES.findall(subtypes) if t != "NoneType"]
    choices = ", ".join(dict.fromkeys(values))
    kinds = " or ".join(types)
    if choices and kinds:
        return f"{value} is not one of: {choices}; nor a valid {kinds}"
    return f"{value} is not one of: {choices}" if choices else f"{value} is not a valid {kinds}"


def _explain(keys: list[str], reason: str) -> str:
    """Reword the reasons a user meets most (a Literal's values, an unknown option) with the option's name."""
    literal = _LITERAL.match(reason)
    if literal:
        allowed = ", ".join(v.strip().strip("'\"") for v in literal.group(1).split(","))
        return f"--{'.'.join(keys)}: {literal.group(2)!r} is not one of: {allowed}"
    typed = _TYPE.match(reason)
    if typed:
        return f"--{'.'.join(keys)}: {typed.group(2)!r} is not a valid {typed.group(1)}"
    unknown = _UNKNOWN_OPTION.match(reason)
    if unknown:
        return f"unknown option --{'.'.join([*keys, unknown.group(1)])}"
    reason = reason[:1].lower() + reason[1:]
    return f"--{'.'.join(keys)}: {reason}" if keys else reason


def yaml_error(report: str, argv: list[str]) -> ConfigError | None:
    """For jsonargparse's "Problems parsing config": the config file on the command line that is not YAML, with its
    line and the YAML parser's reason (jsonargparse names neither the file nor the line); None otherwise."""
    if "Problems parsing config" not in report:
        return None
    for path in _config_files(argv):
        try:
            yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.MarkedYAMLError as err:
            mark, context = err.problem_mark, err.context_mark
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            details = [f"column {mark.column + 1}"] if mark else []
            if err.context and context:
                details.append(f"{err.context} at line {context.line + 1}")
            return ConfigError(f"{where}: not valid YAML: {err.problem} ({', '.join(details)})")
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
    return None


def _config_files(argv: list[str]) -> list[Path]:
    """The files a command line gives as configs: after -c/--config, or any existing .yaml/.yml path."""
    flagged = [value for flag, value in zip(argv, argv[1:], strict=False) if flag in ("-c", "--config")]
    values = [arg.partition("=")[2] or arg for arg in argv]
    named = [value for value in values if value.endswith((".yaml", ".yml"))]
    return [Path(value) for value in dict.fromkeys(flagged + named) if Path(value).is_file()]


def trainer_config_error(err: ValueError) -> ConfigError | None:
    """A Trainer setting that does not fit the data, said in the CLI's terms; None for other errors."""
    interval = _VAL_INTERVAL.search(str(err))
    if interval:
        steps, batches = interval.groups()
        return ConfigError(
            f"--trainer.val_check_interval {steps} is more than the {batches} batches of one training epoch: "
            f"set --trainer.check_val_every_n_epoch null (validate every {steps} steps across epochs) "
            f"or --trainer.val_check_interval {batches} or less"
        )
    fsdp = _FSDP_NEEDS_GPU.search(str(err))
    if fsdp:
        return ConfigError(
            f"--trainer.strategy fsdp needs CUDA GPUs (Lightning's FSDP refuses accelerator {fsdp.group(1)!r}): "
            "on CPU use --trainer.strategy ddp"
        )
    return None
