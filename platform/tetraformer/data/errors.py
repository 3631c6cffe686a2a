"""DataError: a problem with the user's data, located at a file and line; and option checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from tetraformer.errors import TetraformerError


class DataError(TetraformerError):
    """Bad input data; formats as `path:line: message` when the location is known."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(self._format())

    def _format(self) -> str:
        """Prefix the message with `path:line: ` (or `path: `) when known."""
        if self.path is None:
            return self.message
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"

    def __reduce__(self) -> tuple[type[DataError], tuple[str, str | None, int | None]]:
        # keep path and line when the error crosses a process boundary (DataLoader / datasets workers)
        return type(self), (self.message, self.path, self.line)


def check_choice(name: str, value: Any, choices: Any) -> None:
    """Raise a ValueError naming the allowed values when value is not one of a Literal type's."""
    allowed = get_args(choices)
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; expected one of {', '.join(map(str, allowed))}")
