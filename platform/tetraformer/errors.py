"""TetraformerError: the base of every error in the user's input or setup (data, configs, checkpoints)."""

from __future__ import annotations

from typing import Any


class TetraformerError(ValueError):
    """A problem the user can fix; the CLI prints its message on one line, without a traceback."""

    exit_code = 2  # the command's exit status: 2 for a mistake in the input, as argparse's usage errors


class ConfigError(TetraformerError):
    """A bad option value, an unknown key or a missing config file."""


class OptionError(ConfigError):
    """A value its option does not allow, raised by the class that defines the option (`owner`, an instance or a
    class): the CLI finds the option's full name (`--model.arch.n_heads`) from the owner and the option's name."""

    def __init__(self, owner: object, option: str, value: Any, allowed: str) -> None:
        self.owner = owner if isinstance(owner, type) else type(owner)
        self.option, self.value, self.allowed = option, value, allowed
        super().__init__(f"{option}={value!r}: {allowed}")


def require(owner: object, option: str, value: Any, ok: bool, allowed: str) -> None:
    """Raise an OptionError for `owner`'s `option` unless `ok`; `allowed` says what the option takes."""
    if not ok:
        raise OptionError(owner, option, value, allowed)


def at_least(owner: object, low: float, **values: float | None) -> None:
    """Each named value is `low` or more (None, an unset option, passes)."""
    for option, value in values.items():
        require(owner, option, value, value is None or value >= low, f"must be {low} or more")


def above(owner: object, low: float, **values: float | None) -> None:
    """Each named value is more than `low` (None, an unset option, passes)."""
    for option, value in values.items():
        require(owner, option, value, value is None or value > low, f"must be more than {low}")


def within(owner: object, low: float, high: float, **values: float | None) -> None:
    """Each named value lies in [low, high] (None, an unset option, passes)."""
    for option, value in values.items():
        require(owner, option, value, value is None or low <= value <= high, f"must be from {low} to {high}")


def probability(owner: object, **values: float | None) -> None:
    """Each named value lies in [0, 1): a dropout rate, a smoothing, a masking share (None passes)."""
    for option, value in values.items():
        require(owner, option, value, value is None or 0 <= value < 1, "must be 0 or more and less than 1")


class RunsFailed(TetraformerError):
    """Some or all runs of a command that starts several (compare) failed; their report is written."""

    exit_code = 1
