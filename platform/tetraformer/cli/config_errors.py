"""A config or command-line mistake told in one line (a ConfigError) instead of jsonargparse's nested report."""

from __future__ import annotations

import re

from tetraformer.errors import ConfigError

_PARSER_KEY = re.compile(r'^Parser key "([^"]+)":\s*(.*)$')
_LITERAL = re.compile(r"^Expected a typing\.Literal\[(.*)\]\. Got value: (.*)$")
_TYPE = re.compile(r"^Expected a <class '(\w+)'>\. Got value: (.*)$")
_UNKNOWN_OPTION = re.compile(r"^Option '([^']+)' is not accepted$")
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
    for raw in report.splitlines():
        line = raw.strip().removeprefix("- ").strip()
        match = _PARSER_KEY.match(line)
        if match:
            keys.append(match.group(1))
            line = match.group(2)
        if line and not line.startswith(_STRUCTURE):
            return _explain(keys, line)
    return report.strip().splitlines()[0] if report.strip() else "invalid configuration"


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
