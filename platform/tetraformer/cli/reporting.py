"""How every `tetraformer` command reports: INFO logs on stderr, and a mistake the user can fix as one `error:` line.

Light on purpose (no torch, no Lightning): the commands that start without Lightning use it too.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from tetraformer.errors import TetraformerError


def reporting(command: Callable[[], None]) -> None:
    """Run `command` with the CLI's logging; a TetraformerError or a missing file ends it in one `error:` line and
    the error's exit status (2 unless it names another), without a traceback."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        command()
    except (TetraformerError, FileNotFoundError) as err:  # the user can fix it: one line, no traceback
        sys.stderr.write(f"error: {err}\n")
        raise SystemExit(getattr(err, "exit_code", 2)) from err
