"""Start-up: `import tetraformer.cli` loads nothing heavy.

What `generate` imports (a whole generate, the CLI's modules, each generating task's module) loading no data, W&B,
interop or lm-eval stack, and the probe seeing a lazy `datasets` import when data is read, are one fresh interpreter's
looks in tests/tasks/language_modeling/test_generate.py (it has a checkpoint to generate from)."""

from __future__ import annotations

from tests.lazy_imports import HEAVY, loaded_after


def test_importing_the_cli_loads_nothing_heavy() -> None:
    """The console script's module is light: each command loads what it needs when it runs."""
    assert loaded_after("import tetraformer.cli", HEAVY) == []
