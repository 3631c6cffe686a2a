"""Start-up: `import tetraformer.cli` loads nothing heavy, and what `generate` imports loads no data or W&B stack."""

from __future__ import annotations

from tests.lazy_imports import HEAVY, NOT_FOR_GENERATE, loaded_after


def test_importing_the_cli_loads_nothing_heavy() -> None:
    """The console script's module is light: each command loads what it needs when it runs."""
    assert loaded_after("import tetraformer.cli", HEAVY) == []


def test_what_generate_imports_leaves_data_and_interop_unloaded() -> None:
    """The CLI's modules (`tetraformer --help` loads them) and each generating task's module (what a checkpoint
    names) load without `datasets`, W&B, the Hugging Face interop or lm-eval: `generate` reads no data file, and
    `evaluate` imports lm-eval when it runs."""
    code = (
        "import tetraformer.cli.app, tetraformer.cli.commands, tetraformer.cli.task_loading, tetraformer.cli.evaluate\n"
        "import tetraformer.evaluation.harness, tetraformer.evaluation.scores\n"
        "import tasks.language_modeling.module, tasks.seq2seq.module\n"
        "import tetraformer.training.checkpointing.loading"
    )
    assert loaded_after(code, NOT_FOR_GENERATE) == []


def test_reading_data_still_loads_datasets() -> None:
    """The probe sees a lazy import when it happens: reading a text file brings `datasets` in."""
    code = (
        "import tempfile, pathlib\nfrom tetraformer.data import read_text\n"
        "path = pathlib.Path(tempfile.mkdtemp()) / 'a.txt'\npath.write_text('some text\\n')\n"
        "read_text(path, cache_dir=path.parent / 'cache')"
    )
    assert loaded_after(code, ("datasets",)) == ["datasets"]
