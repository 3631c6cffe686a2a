"""Between data and model: no module reads the datamodule through the trainer, no datamodule reads the module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*sorted((ROOT / "tasks").rglob("*.py")), *sorted((ROOT / "platform").rglob("*.py"))]
TASK_PACKAGES = sorted(p.parent for p in (ROOT / "tasks").glob("*/module.py"))
DATAMODULES = [*sorted((ROOT / "tasks").glob("*/data.py")), *sorted((ROOT / "platform").rglob("*datamodule.py"))]


def attribute_reads(path: Path, owner: str, name: str) -> Iterator[int]:
    """Lines where `<...>.owner.name` or `owner.name` is read in a file."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute) or node.attr != name:
            continue
        value = node.value
        if (isinstance(value, ast.Attribute) and value.attr == owner) or (
            isinstance(value, ast.Name) and value.id == owner
        ):
            yield node.lineno


def getattr_reads(path: Path, name: str) -> Iterator[int]:
    """Lines where `getattr(<...>, "name"...)` is called in a file."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        called = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
        if called and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == name:
            yield node.lineno


def test_nothing_reads_the_datamodule_through_the_trainer() -> None:
    """The module gets the data's DataSpec handed over; nothing under tasks/ or platform/ reads trainer.datamodule,
    as an attribute or through getattr."""
    assert len(SOURCES) > 100, "the walk missed the tree"
    found = [f"{p.relative_to(ROOT)}:{line}" for p in SOURCES for line in attribute_reads(p, "trainer", "datamodule")]
    found += [f"{p.relative_to(ROOT)}:{line}" for p in SOURCES for line in getattr_reads(p, "datamodule")]
    assert not found, "reads of trainer.datamodule:\n" + "\n".join(found)


def test_no_datamodule_reads_the_module() -> None:
    """Datamodules take what they need from their own options (the CLI links model options to them)."""
    assert {p.parent for p in DATAMODULES} >= set(TASK_PACKAGES)  # every task's datamodule is looked at
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in DATAMODULES
        for line in attribute_reads(p, "trainer", "lightning_module")
    ]
    assert not found, "datamodules reading the module:\n" + "\n".join(found)
