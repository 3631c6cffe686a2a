"""The `tetraformer` command line: Lightning's subcommands plus generate, tokenizer, convert, attention, compare.

Nothing outside this package imports it; `main` is the console script and `python -m tetraformer.cli`. Importing
the package loads nothing heavy: Lightning and the data stack load when a command runs, after `quiet` has set
what they read at import.
"""

from __future__ import annotations

import importlib
import sys

from tetraformer.cli.quiet import quiet_third_party
from tetraformer.cli.startup import long_lived_imports

# `tetraformer NAME` -> "module:function(argv)" of the commands that train nothing and read no checkpoint: they start
# without Lightning (about 3.5 s sooner on 2 CPU cores); every other command goes through tetraformer.cli.app
LIGHT_COMMANDS: dict[str, str] = {
    "demo-data": "tetraformer.cli.demo_data:demo_data_main",  # the demo datasets built from packages
    "summary": "tetraformer.cli.summary:summary_main",  # a finished run's files, throughput and val/loss
}


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `tetraformer` console script."""
    quiet_third_party()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in LIGHT_COMMANDS:
        from tetraformer.cli.reporting import reporting

        module, _, name = LIGHT_COMMANDS[argv[0]].partition(":")
        with long_lived_imports():
            command = getattr(importlib.import_module(module), name)
        reporting(lambda: command(argv[1:]))
        return
    with long_lived_imports():  # here, not above: `import tetraformer.cli` stays light
        from tetraformer.cli.app import main as run

    run(argv)


__all__ = ["main"]
