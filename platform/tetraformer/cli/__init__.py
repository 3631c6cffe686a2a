"""The `tetraformer` command line: Lightning's subcommands plus generate, tokenizer, convert, attention, compare.

Nothing outside this package imports it; `main` is the console script and `python -m tetraformer.cli`. Importing
the package loads nothing heavy: Lightning and the data stack load when a command runs, after `quiet` has set
what they read at import.
"""

from __future__ import annotations

from tetraformer.cli.quiet import quiet_third_party


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `tetraformer` console script."""
    quiet_third_party()
    from tetraformer.cli.app import main as run  # here, not above: `import tetraformer.cli` stays light

    run(argv)


__all__ = ["main"]
