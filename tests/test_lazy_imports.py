"""Start-up: `import tetraformer.cli` loads nothing heavy.

What `generate` imports (a whole generate, the CLI's modules, each generating task's module) loading no data, W&B,
interop or lm-eval stack, and the probe seeing a lazy `datasets` import when data is read, are one fresh interpreter's
looks in tests/tasks/language_modeling/test_generate.py (it has a checkpoint to generate from)."""

from __future__ import annotations

from pathlib import Path

from tests.lazy_imports import HEAVY, loaded_after, loaded_after_each


def test_importing_the_cli_loads_nothing_heavy() -> None:
    """The console script's module is light: each command loads what it needs when it runs."""
    assert loaded_after("import tetraformer.cli", HEAVY) == []


def test_commands_that_train_nothing_start_without_lightning(tmp_path: Path) -> None:
    """`demo-data` and `summary` (cli.LIGHT_COMMANDS) run, and refuse a mistake in one line, with neither torch nor
    Lightning loaded: seconds sooner than a command that needs them."""
    steps = [
        "from tetraformer.cli import main\nmain(['demo-data', '--list'])",
        f"try:\n    main(['summary', {str(tmp_path / 'no-run')!r}])\n"
        "except SystemExit as stop:\n    assert stop.code == 2",
    ]
    assert loaded_after_each(steps, ("torch", "lightning")) == [[], []]
