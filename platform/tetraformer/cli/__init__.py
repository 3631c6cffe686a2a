"""The `tetraformer` command line: Lightning's subcommands plus generate, tokenizer, convert, attention, compare.

Nothing outside this package imports it; `main` is the console script and `python -m tetraformer.cli`.
"""

from tetraformer.cli.app import main

__all__ = ["main"]
