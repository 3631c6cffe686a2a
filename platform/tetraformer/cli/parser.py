"""CommandParser: argparse for the commands beside Lightning's, failing with one `error:` line."""

from __future__ import annotations

import argparse
import typing

from tetraformer.errors import ConfigError


class CommandParser(argparse.ArgumentParser):
    """argparse for the extra commands, whose mistakes are one `error:` line like the Lightning subcommands'."""

    def error(self, message: str) -> typing.NoReturn:
        """Raise instead of printing the usage: `main` prints the one line."""
        raise ConfigError(f"{message} (see {self.prog} --help)")
